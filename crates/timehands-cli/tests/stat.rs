//! `timehands stat` against ministat: every case under
//! `tests/fixtures/ministat/expected/` (made by `regen.sh` with Debian's
//! ministat 20150715 from the inputs in `data/`) is run with the same
//! arguments and input from the fixtures' directory. A case ministat ran
//! successfully must give the same bytes on standard output, except the few
//! in [`KNOWN_DIFFERENCES`], each with its reason; a case ministat refused
//! must be refused with the one line listed in [`ERRORS`].

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_timehands");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ministat")
}

/// One recorded run of ministat.
struct Case {
    name: String,
    args: Vec<String>,
    stdin: Option<PathBuf>,
    stdout: Vec<u8>,
    status: i32,
}

/// Every case `regen.sh` recorded, by name.
fn cases() -> Vec<Case> {
    let expected = fixtures().join("expected");
    let mut cases: Vec<Case> = fs::read_dir(&expected)
        .expect("the fixtures exist")
        .map(|entry| entry.expect("readable").path())
        .filter(|path| path.extension().is_some_and(|e| e == "args"))
        .map(|path| {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("UTF-8 name")
                .to_string();
            let read = |ext: &str| fs::read(expected.join(format!("{name}.{ext}")));
            let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8");
            let args = text(read("args").expect("args"));
            Case {
                args: args.lines().map(str::to_string).collect(),
                stdin: read("stdin")
                    .ok()
                    .map(|s| fixtures().join(text(s).trim_end())),
                stdout: read("out").expect("out"),
                status: text(read("status").expect("status"))
                    .trim()
                    .parse()
                    .expect("a status"),
                name,
            }
        })
        .collect();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(cases.len() > 50, "only {} fixtures", cases.len());
    cases
}

/// `timehands stat ARGS` in the fixtures' directory.
fn stat(args: &[String], stdin: Stdio) -> Output {
    Command::new(BIN)
        .arg("stat")
        .args(args)
        .current_dir(fixtures())
        .stdin(stdin)
        .output()
        .expect("timehands runs")
}

fn run(case: &Case) -> Output {
    let stdin = match &case.stdin {
        Some(path) => Stdio::from(fs::File::open(path).expect("stdin fixture")),
        None => Stdio::null(),
    };
    stat(&case.args, stdin)
}

/// Cases whose output differs from ministat's on purpose: (case, our whole
/// standard output). The test also checks that ministat's output differs
/// from ours only in the lines each reason names.
const KNOWN_DIFFERENCES: [(&str, &str, &[usize]); 1] = [(
    // 1e9 + 0.1, 0.2, 0.3: ministat's variance (sum of squares minus the
    // squared sum over N) cancels to a negative number, its stddev is -nan
    // and its plot has no spread bar. Ours subtracts the mean first and
    // finds 0.099999964 (the spacing of the doubles near 1e9 shows in the
    // last digits), so the bar line (4) and the table row (7) differ; and
    // the middle dot (line 3) moves one column left, because mean + stddev
    // lies a little past the maximum and widens the axis.
    "cancel",
    "\
x data/cancel.txt
+--------------------------------------------------------------------------+
|x                                   x                                    x|
||___________________________________MA___________________________________||
+--------------------------------------------------------------------------+
    N           Min           Max        Median           Avg        Stddev
x   3         1e+09         1e+09         1e+09         1e+09   0.099999964
",
    &[3, 4, 7],
)];

/// Every case ministat refused or that we refuse, and our one line on
/// standard error. ministat's messages differ: ours name the file, and the
/// line when it is one, in the same words for every error.
const ERRORS: [(&str, &str); 23] = [
    // -C 2 of comments.txt: one line has a second field.
    (
        "comments-C2",
        "data set data/comments.txt must contain at least 3 data points (it has 1)",
    ),
    (
        "err-column-0",
        "error: invalid value '0' for '--column <COLUMN>': 0 is not in 1..=4294967295",
    ),
    (
        "err-column-short",
        "data set data/runs.csv must contain at least 3 data points (it has 0)",
    ),
    (
        "err-column-text",
        "error: invalid value 'two' for '--column <COLUMN>': invalid digit found in string",
    ),
    (
        "err-confidence",
        "error: invalid value '97' for '--confidence <CONFIDENCE>': confidence must be one of 80, 90, 95, 98, 99, 99.5",
    ),
    (
        "err-confidence-nan",
        "error: invalid value 'x' for '--confidence <CONFIDENCE>': confidence must be one of 80, 90, 95, 98, 99, 99.5",
    ),
    (
        "err-delimiter",
        "error: invalid value '' for '--delimiters <DELIMITERS>': the delimiter string cannot be empty",
    ),
    ("err-eight-sets", "too many data sets: 8 files, at most 7"),
    (
        "err-empty",
        "data set data/empty.txt must contain at least 3 data points (it has 0)",
    ),
    (
        "err-empty-stdin",
        "data set <stdin> must contain at least 3 data points (it has 0)",
    ),
    // ministat reads C's hexadecimal 0x10 as 16 and succeeds; Rust's float
    // parser reads decimal only, so this is refused with the line.
    (
        "err-hex",
        "invalid data on line 2 in data/hex.txt: \"0x10\" is not a number",
    ),
    // ministat crashes (SIGSEGV) on an infinite value.
    (
        "err-inf",
        "invalid data on line 2 in data/inf.txt: \"inf\" is not a finite number",
    ),
    (
        "err-missing",
        "cannot open data/no-such-file.txt: No such file or directory (os error 2)",
    ),
    (
        "err-missing-2nd",
        "cannot open data/no-such-file.txt: No such file or directory (os error 2)",
    ),
    (
        "err-only-comments",
        "data set data/only-comments.txt must contain at least 3 data points (it has 0)",
    ),
    (
        "err-text",
        "invalid data on line 3 in data/text.txt: \"abc\" is not a number",
    ),
    (
        "err-trailing-junk",
        "invalid data on line 3 in data/trailing-junk.txt: \"3ms\" is not a number",
    ),
    (
        "err-two-points",
        "data set data/two.txt must contain at least 3 data points (it has 2)",
    ),
    (
        "err-unknown-flag",
        "error: unexpected argument '-x' found tip: to pass '-x' as a value, use '-- -x'",
    ),
    (
        "err-width-neg",
        "error: invalid value '-3' for '--width <WIDTH>': -3 is not in 2..=65535",
    ),
    (
        "err-width-text",
        "error: invalid value 'wide' for '--width <WIDTH>': invalid digit found in string",
    ),
    // ministat crashes with -w 1 (its column width is span / 0) and draws an
    // empty frame with -w 0 (writing outside its buffer); we ask for two
    // columns at least.
    (
        "err-width-1",
        "error: invalid value '1' for '--width <WIDTH>': 1 is not in 2..=65535",
    ),
    (
        "err-width-0",
        "error: invalid value '0' for '--width <WIDTH>': 0 is not in 2..=65535",
    ),
];

#[test]
fn every_case_ministat_prints_is_printed_byte_for_byte() {
    let mut failures = Vec::new();
    let mut compared = 0;
    for case in cases().iter().filter(|c| c.status == 0) {
        if ERRORS.iter().any(|(name, _)| *name == case.name)
            || KNOWN_DIFFERENCES
                .iter()
                .any(|(name, ..)| *name == case.name)
        {
            continue;
        }
        let out = run(case);
        compared += 1;
        if !out.status.success() || out.stdout != case.stdout {
            failures.push(format!(
                "{} ({}): ministat printed\n{}\ntimehands printed\n{}{}",
                case.name,
                case.args.join(" "),
                String::from_utf8_lossy(&case.stdout),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared > 50, "compared only {compared} cases");
}

#[test]
fn known_differences_are_only_the_lines_explained() {
    let all = cases();
    for (name, ours, lines) in KNOWN_DIFFERENCES {
        let case = all
            .iter()
            .find(|c| c.name == name)
            .expect("the case exists");
        assert_eq!(case.status, 0, "{name}");
        let out = run(case);
        assert!(out.status.success(), "{name}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), ours, "{name}");
        let theirs = String::from_utf8(case.stdout.clone()).expect("UTF-8");
        for (number, (a, b)) in (1..).zip(theirs.lines().zip(ours.lines())) {
            assert_eq!(
                a == b,
                !lines.contains(&number),
                "{name}: line {number}: ministat {a:?}, ours {b:?}"
            );
        }
        assert_eq!(theirs.lines().count(), ours.lines().count(), "{name}");
    }
}

#[test]
fn every_refused_case_gets_one_line_naming_the_input() {
    let all = cases();
    for case in &all {
        let listed = ERRORS.iter().find(|(name, _)| *name == case.name);
        if case.status == 0 && listed.is_none() {
            continue;
        }
        let (_, line) = listed.unwrap_or_else(|| panic!("{}: ministat refused it", case.name));
        // A missing file in the OS's words (Windows' are not strerror's).
        let missing = std::io::Error::from_raw_os_error(2).to_string();
        let line = line.replace("No such file or directory (os error 2)", &missing);
        let out = run(case);
        assert!(!out.status.success(), "{}", case.name);
        assert_eq!(out.stdout, b"", "{}", case.name);
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("timehands: {line}\n"),
            "{}",
            case.name
        );
    }
    for (name, _) in ERRORS {
        assert!(
            all.iter().any(|c| c.name == name),
            "{name} is not a fixture"
        );
    }
}

#[test]
fn help_shows_the_flags_and_examples() {
    let out = stat(&["--help".to_string()], Stdio::null());
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    for flag in ["-A", "-C", "-c", "-d", "-n", "-q", "-s", "-w", "Examples:"] {
        assert!(text.contains(flag), "no {flag} in\n{text}");
    }
}

// File names are bytes on these; macOS refuses names that are not UTF-8,
// and Windows' are UTF-16.
#[cfg(all(unix, not(target_vendor = "apple")))]
#[test]
fn a_file_name_that_is_not_utf8_is_read_and_a_directory_is_refused() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("stat-names");
    fs::create_dir_all(&dir).expect("a scratch directory");
    let odd = dir.join(OsStr::from_bytes(b"\xffdata.txt"));
    fs::write(&odd, "1\n2\n3\n").expect("written");
    let out = Command::new(BIN)
        .args([OsStr::new("stat"), OsStr::new("-n"), odd.as_os_str()])
        .output()
        .expect("timehands runs");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(out.status.success(), "{text}");
    assert!(
        text.starts_with("x ")
            && text
                .lines()
                .next()
                .is_some_and(|l| l.ends_with("\u{fffd}data.txt")),
        "{text}"
    );

    let out = stat(&["data".to_string()], Stdio::null());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "timehands: cannot read data: Is a directory (os error 21)\n"
    );
}

/// `timehands stat` with `args` in the fixtures' data directory, which must
/// succeed; its standard output.
fn stat_in_data(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("stat")
        .args(args)
        .current_dir(fixtures().join("data"))
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn the_flags_past_ministat_leave_its_output_as_it_is_and_add_after_it() {
    let ministat = stat_in_data(&["iguana", "chameleon"]);
    let more = stat_in_data(&[
        "--percentiles",
        "50,90,99.9",
        "--welch",
        "--mann-whitney",
        "iguana",
        "chameleon",
    ]);
    let added = more
        .strip_prefix(&ministat)
        .expect("ministat's output first");
    // NumPy: np.percentile(iguana, [50, 90, 99.9]) = 200, 540, 747.9, and
    // chameleon's 500, 846, 929.16; SciPy 1.10: ttest_ind(chameleon, iguana,
    // equal_var=False) t 1.488839530990719, p 0.17772184154340448;
    // mannwhitneyu(chameleon, iguana, method="asymptotic") U 26, p
    // 0.18758480505961106.
    assert_eq!(
        added,
        "\
Percentiles (definition 7, as R and NumPy):
                p50           p90         p99.9
x   7           200           540         747.9
+   5           500           846        929.16
Against x iguana, at 95.0% confidence:
+ Welch's t 1.48884, df 7.42543, p 0.177722: no difference proven
+ Mann-Whitney U 26, z 1.31776, p 0.187585: no difference proven
"
    );
}

#[test]
fn json_has_the_sets_the_percentiles_and_every_test_asked_for() {
    let text = stat_in_data(&[
        "-c",
        "80",
        "--json",
        "--percentiles",
        "50",
        "--welch",
        "--mann-whitney",
        "iguana",
        "chameleon",
    ]);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("one JSON document");
    assert_eq!(doc["confidence"], 80.0);
    let sets = doc["sets"].as_array().expect("sets");
    assert_eq!(sets.len(), 2);
    assert_eq!(
        (&sets[0]["name"], &sets[0]["symbol"]),
        (&"iguana".into(), &"x".into())
    );
    assert_eq!(
        (&sets[1]["n"], &sets[1]["median"]),
        (&5.into(), &500.0.into())
    );
    assert_eq!(sets[0]["percentiles"]["p50"], 200.0);
    let c = &doc["comparisons"][0];
    assert_eq!(
        (&c["set"], &c["against"]),
        (&"chameleon".into(), &"iguana".into())
    );
    // ministat's manual: a difference of 240 +/- 212.215 at 80%.
    assert_eq!(c["student"]["difference"], 240.0);
    assert!((c["student"]["margin"].as_f64().expect("margin") - 212.215).abs() < 5e-4);
    assert_eq!(c["student"]["proven"], true);
    let welch_p = c["welch"]["p"].as_f64().expect("p");
    assert!((welch_p - 0.17772184154340448).abs() < 1e-9, "{c}");
    // p 0.178 is below 1 - 0.80: proven at 80%.
    assert_eq!(c["welch"]["proven"], true);
    assert_eq!(c["mann_whitney"]["u"], 26.0);
    assert_eq!(c["mann_whitney"]["proven"], true);
    // Without the flags, only Student's test.
    let plain: serde_json::Value =
        serde_json::from_str(&stat_in_data(&["--json", "iguana", "chameleon"])).expect("JSON");
    assert!(plain["comparisons"][0]["welch"].is_null(), "{plain}");
    assert!(plain["sets"][0]["percentiles"].is_null(), "{plain}");
}

#[test]
fn a_percentile_outside_0_to_100_is_refused_in_one_line() {
    for bad in ["101", "-1", "half"] {
        let out = Command::new(BIN)
            .args(["stat", "--percentiles", bad, "iguana"])
            .current_dir(fixtures().join("data"))
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(bad), "{err}");
    }
}
