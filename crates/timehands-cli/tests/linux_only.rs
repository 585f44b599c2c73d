//! `latency`, `load`, `signals` and `callers` off Linux: one line saying what they need and where
//! they are, exit status 2, whatever the flags.
#![cfg(not(target_os = "linux"))]

mod support;

#[test]
fn latency_and_load_refuse_in_one_line_with_status_2() {
    for args in [
        &["latency"][..],
        &["latency", "-p", "80", "-l", "10"],
        &["load", "-t", "6"],
        &["signals", "-r", "50000"],
        &["callers", "--seconds", "1"],
    ] {
        let status = support::fails_in_one_line(args, "needs Linux");
        assert_eq!(status, 2, "{args:?}");
        let err = String::from_utf8(support::run(args).stderr).expect("utf-8");
        assert!(
            err.starts_with(&format!("timehands: {} needs Linux (", args[0]))
                && err.contains(&format!("this is {}", std::env::consts::OS)),
            "{args:?}: {err}"
        );
    }
}
