//! `timehands tsc-sync`: the pairs, the verdict, JSON, and the errors.

mod support;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod on_x86_64_linux {
    use super::support::{fails_in_one_line, json, stdout};

    /// Every pair of the CPUs this process may use, as the JSON gives them.
    fn all_pairs() -> Vec<serde_json::Value> {
        let doc = json(&["tsc-sync", "--handoffs", "200", "--json"]);
        doc["pairs"].as_array().expect("pairs").clone()
    }

    #[test]
    fn the_text_has_a_row_per_pair_and_a_verdict() {
        let text = stdout(&["tsc-sync", "--handoffs", "200"]);
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
    fn bad_cpu_lists_and_counts_fail_in_one_line() {
        fails_in_one_line(&["tsc-sync", "--cpus", "0,100000"], "100000");
        fails_in_one_line(&["tsc-sync", "--cpus", "0"], "--cpus");
        fails_in_one_line(&["tsc-sync", "--cpus", "0,0"], "CPU 0 is given twice");
        fails_in_one_line(&["tsc-sync", "--cpus", "0,1,0"], "CPU 0 is given twice");
        fails_in_one_line(&["tsc-sync", "--cpus", "0,one"], "one");
        fails_in_one_line(&["tsc-sync", "--cpus", "0,-1"], "-1");
        fails_in_one_line(&["tsc-sync", "--handoffs", "1"], "--handoffs");
        fails_in_one_line(&["tsc-sync", "--bogus"], "--bogus");
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
#[test]
fn elsewhere_it_says_it_needs_an_x86_64_tsc() {
    support::fails_in_one_line(&["tsc-sync"], "x86_64");
}
