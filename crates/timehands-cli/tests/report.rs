//! `timehands report` (and no subcommand): the facts, the cost table, the
//! accuracy table, JSON, the `--out` page, and the errors.

mod support;

use support::{assert_svg, fails_in_one_line, json, scratch, stdout, under_a_file};
use timehands::sys::KernelClock;

/// Few short rounds: the tests check the shape, not the figures.
const QUICK: [&str; 6] = ["--rounds", "3", "--calls", "100", "--brackets", "3"];

/// The legend of the kernel's clocks, and as SVG writes it: read by
/// `clock_gettime` but on Windows.
const KERNEL_LEGEND: &str = if cfg!(windows) {
    "the kernel's"
} else {
    "the kernel's (clock_gettime)"
};
const KERNEL_LEGEND_SVG: &str = if cfg!(windows) {
    "the kernel&apos;s"
} else {
    "the kernel&apos;s (clock_gettime)"
};

/// Whether the kernel has coarse clocks to compare ours with: Linux's and
/// FreeBSD's have.
const COARSE: bool = cfg!(any(target_os = "linux", target_os = "freebsd"));

/// Our clocks and the kernel's each is compared with here, by the OS's
/// names, in the order of the accuracy table.
fn ours_with_twins() -> Vec<(&'static str, &'static str)> {
    let monotonic = KernelClock::Monotonic.name();
    [
        ("timehands now()", monotonic),
        ("timehands now_unordered()", monotonic),
        ("timehands now_coarse()", "CLOCK_MONOTONIC_COARSE"),
        ("timehands gettime(Realtime)", KernelClock::Realtime.name()),
        ("timehands gettime(Boottime)", KernelClock::Boottime.name()),
        ("timehands gettime(RealtimeCoarse)", "CLOCK_REALTIME_COARSE"),
        ("std Instant::now()", monotonic),
    ]
    .into_iter()
    .filter(|(_, kernel)| COARSE || !kernel.ends_with("_COARSE"))
    .collect()
}

fn args<'a>(head: &[&'a str]) -> Vec<&'a str> {
    head.iter().copied().chain(QUICK).collect()
}

#[test]
fn the_text_has_the_facts_a_cost_row_per_clock_and_the_accuracy_rows() {
    let text = stdout(&args(&["report"]));
    // The verdict first, then the facts.
    assert!(text.starts_with("Use "), "{text}");
    let verdict = text.split("\n\n").next().expect("a verdict");
    let sentence = verdict.replace('\n', " ");
    assert!(
        sentence.contains(" ns per call")
            && sentence.contains(&format!(
                "from {}, exact to within",
                KernelClock::Monotonic.name()
            )),
        "{verdict}"
    );
    assert!(verdict.lines().all(|l| l.len() <= 78), "{verdict}");
    let counter = timehands::info().counter;
    assert!(
        text.lines()
            .any(|l| l.starts_with("counter") && l.ends_with(counter.name())),
        "{text}"
    );
    let cost = text.split("Accuracy:").next().expect("text");
    let mut clocks = vec![
        "timehands now()",
        KernelClock::MonotonicRaw.name(),
        "std Instant::now()",
    ];
    if COARSE {
        clocks.push("CLOCK_REALTIME_COARSE");
    }
    for clock in clocks {
        let row = cost
            .lines()
            .find(|l| l.starts_with(&format!("{clock} ")))
            .unwrap_or_else(|| panic!("no cost row for {clock} in\n{text}"));
        // label, then rounds, min, median, avg, max, stddev, discarded
        let figures: Vec<&str> = row[clock.len()..].split_whitespace().collect();
        assert_eq!(figures.len(), 7, "{row}");
        assert_eq!(figures[0], "3", "{row}");
    }
    let accuracy = text.split("Accuracy:").nth(1).expect("an accuracy table");
    for (ours, kernel) in ours_with_twins() {
        let row = accuracy
            .lines()
            .find(|l| l.starts_with(&format!("{ours} ")) && l.contains(kernel))
            .unwrap_or_else(|| panic!("no accuracy row {ours} against {kernel} in\n{accuracy}"));
        // A coarse row says that a tick apart is no fault.
        assert_eq!(
            row.contains("up to a tick behind by design"),
            kernel.ends_with("_COARSE"),
            "{row}"
        );
    }
}

#[test]
fn no_subcommand_runs_the_report_with_its_flags() {
    let text = stdout(&QUICK);
    assert!(text.contains("Cost: 3 rounds of 100 calls"), "{text}");
    assert!(text.contains("Accuracy:"), "{text}");
}

#[test]
fn json_has_the_facts_every_clock_and_the_offsets() {
    let doc = json(&args(&["report", "--json"]));
    let verdict = &doc["verdict"];
    let clock = verdict["clock"].as_str().expect("the clock to use");
    assert!(
        [
            "timehands now()",
            KernelClock::Monotonic.name(),
            "std Instant::now()"
        ]
        .contains(&clock),
        "{verdict}"
    );
    // The clock to use is the cheapest of the three.
    let [ours, kernel, std] =
        ["timehands_ns", "kernel_ns", "std_ns"].map(|f| verdict[f].as_f64().expect(f));
    let cheapest = ours.min(kernel).min(std);
    let of_clock = match clock {
        "timehands now()" => ours,
        "std Instant::now()" => std,
        _ => kernel,
    };
    assert_eq!(of_clock, cheapest, "{verdict}");
    assert!(
        verdict["error_ns"].is_i64() && verdict["error_within_ns"].is_u64(),
        "{verdict}"
    );
    assert!(
        verdict["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(&format!("Use {clock} here"))),
        "{verdict}"
    );
    assert!(doc["info"]["counter"].is_string(), "{doc}");
    assert!(doc["info"]["verdicts"].is_array(), "{doc}");
    assert_eq!(doc["rounds"], 3);
    assert_eq!(doc["calls"], 100);
    let cost = doc["cost"].as_array().expect("cost");
    assert_eq!(cost.len(), support::clocks_here(), "{doc}");
    for row in cost {
        let s = &row["ns_per_call"];
        assert_eq!(s["n"], 3, "{row}");
        let [min, median, max] = ["min", "median", "max"].map(|f| s[f].as_f64().expect("a number"));
        assert!(0.0 < min && min <= median && median <= max, "{row}");
        for field in ["clock", "label", "discarded", "calls"] {
            assert!(row.get(field).is_some(), "no {field} in {row}");
        }
        assert!(
            s["stddev"].as_f64().is_some() && s["avg"].as_f64().is_some(),
            "{row}"
        );
    }
    let accuracy = doc["accuracy"].as_array().expect("accuracy");
    let twins = ours_with_twins();
    assert_eq!(accuracy.len(), twins.len(), "{doc}");
    for (row, (ours, kernel)) in accuracy.iter().zip(twins) {
        assert_eq!(row["label"], ours);
        assert_eq!(row["against"], kernel);
        assert!(row["offset_ns"].as_i64().is_some(), "{row}");
        assert!(row["bracket_ns"].as_u64().is_some(), "{row}");
    }
}

#[test]
fn out_writes_the_plots_and_a_page_that_shows_them() {
    let dir = scratch("report-out").join("new");
    let text = stdout(&args(&["report", "--out", dir.to_str().expect("utf-8")]));
    assert_svg(&dir.join("cost.svg"));
    assert_svg(&dir.join("accuracy.svg"));
    let html = std::fs::read_to_string(dir.join("index.html")).expect("index.html");
    assert!(
        html.contains("src=\"cost.svg\"") && html.contains("src=\"accuracy.svg\""),
        "{html}"
    );
    let first_row = text
        .lines()
        .find(|l| l.starts_with("timehands now() "))
        .expect("a row");
    assert!(
        html.contains(first_row),
        "the page lacks the text report:\n{html}"
    );
    let cost = std::fs::read_to_string(dir.join("cost.svg")).expect("cost.svg");
    assert!(
        cost.contains(KernelClock::MonotonicRaw.name()),
        "no clock names in the plot"
    );
    // Ours, the kernel's and std's clocks in three colours, with a legend.
    for (colour, name) in [
        ("#1F77B4", "timehands (ours)"),
        ("#FF7F0E", KERNEL_LEGEND_SVG),
        ("#2CA02C", "std"),
    ] {
        assert!(
            cost.contains(&format!("fill=\"{colour}\"")),
            "no {colour} in cost.svg"
        );
        assert!(
            cost.contains(&format!(">\n{name}\n<")),
            "no legend {name} in cost.svg"
        );
    }
    // The page leads with the verdict.
    let verdict = text
        .split("\n\n")
        .next()
        .expect("a verdict")
        .replace('\n', " ");
    let body = html.split("<body>").nth(1).expect("a body");
    let lead = body
        .split("<p class=\"verdict\" id=\"verdict\">")
        .nth(1)
        .expect("a verdict");
    assert!(
        body.find("<p").expect("a paragraph") < body.find("<img").expect("a plot"),
        "{html}"
    );
    assert_eq!(lead.split("</p>").next(), Some(verdict.as_str()), "{html}");
}

/// A headless Chromium on PATH, or the reason the browser checks are skipped.
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|name| {
        std::process::Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success())
    });
    if found.is_none() {
        eprintln!("skipped: no chromium on PATH (apt-get install chromium)");
    }
    found
}

#[test]
fn the_page_in_a_browser_leads_with_the_verdict_and_draws_the_plots() {
    let Some(chromium) = chromium() else {
        return;
    };
    let dir = scratch("report-browser");
    let out = dir.join("page");
    stdout(&args(&["report", "--out", out.to_str().expect("utf-8")]));
    let page = format!("file://{}", out.join("index.html").display());
    let profile = dir.join("profile");
    let shot = dir.join("shot.png");
    let browse = |what: &[&str]| {
        std::process::Command::new("timeout")
            .arg("120")
            .arg(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1000,1400",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(what)
            .arg(&page)
            .output()
            .expect("chromium runs")
    };
    let dom = browse(&["--dump-dom"]);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8(dom.stdout).expect("utf-8");
    let body = dom.split("<body>").nth(1).expect("a body");
    // The first thing after the title is the verdict, then the key of colours.
    let after_title = body.split("</h1>").nth(1).expect("a title").trim_start();
    assert!(
        after_title.starts_with("<p class=\"verdict\" id=\"verdict\">Use "),
        "{dom}"
    );
    for name in ["timehands (ours)", KERNEL_LEGEND, "std"] {
        assert!(
            body.contains(&format!("</span>{name}</li>")),
            "no key {name}: {dom}"
        );
    }
    let shot_flag = format!("--screenshot={}", shot.display());
    let taken = browse(&[&shot_flag]);
    assert!(
        taken.status.success(),
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    // The IHDR chunk: width and height of the window.
    let size = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().expect("4 bytes"));
    assert_eq!((size(16), size(20)), (1000, 1400));
}

#[test]
fn bad_flags_and_unwritable_directories_fail_in_one_line() {
    fails_in_one_line(&["report", "--bogus"], "--bogus");
    fails_in_one_line(&["report", "--rounds", "0"], "--rounds");
    fails_in_one_line(&["report", "--calls", "ten"], "ten");
    fails_in_one_line(&["report", "--brackets", "-3"], "-3");
    fails_in_one_line(&["report", "--brackets", "4294967295"], "4294967295");
    fails_in_one_line(&["report", "--rounds", "4294967295"], "4294967295");
    fails_in_one_line(&["report", "--calls", "1000000000"], "1000000000");
    fails_in_one_line(&["report", "--out", "/proc/x"], "/proc/x");
    let under = under_a_file();
    fails_in_one_line(&["report", "--out", &under], &under);
    fails_in_one_line(&["--rounds", "x"], "x");
}
