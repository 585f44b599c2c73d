//! `timehands tsc-sync`: the pairs, the verdict, JSON, and the errors.

mod support;

// The pairs need threads pinned to CPUs, which Linux allows and macOS never
// does; these are Linux's answers.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod on_x86_64_linux {
    use super::support::{fails_in_one_line, run};

    /// Runs `args` and returns its stdout, checking that the exit status is
    /// the verdict: 0 when synchronized, 1 when some pair is apart.
    fn checked(args: &[&str]) -> String {
        let out = run(args);
        let text = String::from_utf8(out.stdout).expect("utf-8");
        let synchronized = if args.contains(&"--json") {
            let doc: serde_json::Value = serde_json::from_str(&text).expect("one JSON document");
            doc["synchronized"].as_bool().expect("a verdict")
        } else {
            text.contains("verdict: synchronized") || text.contains("verdict: nothing to compare")
        };
        assert_eq!(
            out.status.code(),
            Some(if synchronized { 0 } else { 1 }),
            "{args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }

    /// Runs `args` (with `--json`) and parses the document.
    fn json(args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&checked(args)).expect("one JSON document")
    }

    /// Every pair of the CPUs this process may use, as the JSON gives them.
    fn all_pairs() -> Vec<serde_json::Value> {
        let doc = json(&["tsc-sync", "--handoffs", "200", "--json"]);
        doc["pairs"].as_array().expect("pairs").clone()
    }

    #[test]
    fn the_text_has_a_row_per_pair_and_a_verdict() {
        let text = checked(&["tsc-sync", "--handoffs", "200"]);
        let verdict = text.lines().last().expect("a verdict");
        assert!(verdict.starts_with("verdict: "), "{text}");
        let rows: Vec<&str> = text
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with("verdict"))
            .collect();
        assert_eq!(rows.len(), all_pairs().len(), "{text}");
        for row in rows {
            assert!(row.ends_with("yes") || row.ends_with("NO"), "{row}");
            assert!(row.contains(" cy / "), "{row}");
        }
    }

    #[test]
    fn json_gives_the_bounds_of_the_pairs_asked_for() {
        // Any two CPUs this process may use, the other way round.
        let Some(first) = all_pairs().first().cloned() else {
            return;
        };
        let (a, b) = (first["cpus"][0].clone(), first["cpus"][1].clone());
        let list = format!("{b},{a}");
        let doc = json(&["tsc-sync", "--cpus", &list, "--handoffs", "300", "--json"]);
        assert!(
            doc["frequency_hz"].as_u64().is_some_and(|hz| hz > 0),
            "{doc}"
        );
        assert_eq!(doc["handoffs"], 300);
        let pairs = doc["pairs"].as_array().expect("pairs");
        assert_eq!(pairs.len(), 1, "{doc}");
        let pair = &pairs[0];
        assert_eq!(pair["cpus"], serde_json::json!([b, a]));
        let lo = pair["lo_cycles"].as_i64().expect("lo");
        let hi = pair["hi_cycles"].as_i64().expect("hi");
        assert!(lo < hi, "{pair}");
        assert!(
            pair["min_round_trip_cycles"]
                .as_u64()
                .is_some_and(|c| c > 0),
            "{pair}"
        );
        assert!(
            pair["lo_ns"].as_f64().is_some() && pair["hi_ns"].as_f64().is_some(),
            "{pair}"
        );
        assert_eq!(pair["synchronized"], lo <= 0 && 0 <= hi);
        assert_eq!(doc["synchronized"], pair["synchronized"]);
    }

    #[test]
    fn bad_cpu_lists_and_counts_fail_in_one_line_with_status_2() {
        for (args, naming) in [
            (&["tsc-sync", "--cpus", "0,100000"][..], "100000"),
            (&["tsc-sync", "--cpus", "0"], "--cpus"),
            (&["tsc-sync", "--cpus", "0,0"], "CPU 0 is given twice"),
            (&["tsc-sync", "--cpus", "0,1,0"], "CPU 0 is given twice"),
            (&["tsc-sync", "--cpus", "0,one"], "one"),
            (&["tsc-sync", "--cpus", "0,-1"], "-1"),
            (&["tsc-sync", "--handoffs", "1"], "--handoffs"),
            (&["tsc-sync", "--bogus"], "--bogus"),
        ] {
            assert_eq!(fails_in_one_line(args, naming), 2, "{args:?}");
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[test]
fn elsewhere_it_says_it_needs_an_x86_64_tsc() {
    assert_eq!(support::fails_in_one_line(&["tsc-sync"], "x86_64"), 2);
}
