//! Which CPU each measuring thread runs on (`-a`, `-S`).
//!
//! cyclictest's rules: `-a` alone puts thread N on the N-th CPU this process
//! may use (round-robin); `-a CPUSET` puts them round-robin on that set, in
//! ascending CPU order, so `-a 3-5,0 -t 5` runs threads 0 and 4 on CPU 0.

/// Parses a CPU list such as `0`, `2-3` or `3-5,0`, given to `flag`, into
/// ascending CPU numbers, and refuses a CPU this process may not use.
pub fn parse_cpu_list(flag: &str, text: &str, allowed: &[usize]) -> Result<Vec<usize>, String> {
    let bad = || format!("{flag} {text}: bad CPU list (want numbers and ranges such as 0,2-3)");
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let first: usize = first.trim().parse().map_err(|_| bad())?;
        let last: usize = last.trim().parse().map_err(|_| bad())?;
        if first > last {
            return Err(bad());
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    if let Some(cpu) = cpus.iter().find(|cpu| !allowed.contains(cpu)) {
        return Err(format!(
            "{flag} {text}: CPU {cpu} is not available to this process (allowed: {})",
            join(allowed)
        ));
    }
    Ok(cpus)
}

/// The CPU of thread `index` when threads go round-robin over `cpus`.
pub fn cpu_for_thread(index: usize, cpus: &[usize]) -> usize {
    cpus[index % cpus.len()]
}

fn join(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    const EIGHT: [usize; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

    #[test]
    fn lists_and_ranges_come_out_ascending_and_once() {
        assert_eq!(parse_cpu_list("-a", "3-5,0", &EIGHT), Ok(vec![0, 3, 4, 5]));
        assert_eq!(parse_cpu_list("-a", "2", &EIGHT), Ok(vec![2]));
        assert_eq!(parse_cpu_list("-a", "1,1-2", &EIGHT), Ok(vec![1, 2]));
    }

    #[test]
    fn threads_go_round_robin_as_cyclictest_puts_them() {
        let cpus = parse_cpu_list("-a", "3-5,0", &EIGHT).expect("valid");
        let placed: Vec<usize> = (0..5).map(|i| cpu_for_thread(i, &cpus)).collect();
        assert_eq!(placed, [0, 3, 4, 5, 0]);
    }

    #[test]
    fn garbage_and_foreign_cpus_are_refused_with_the_flag_named() {
        for text in ["", "x", "1-", "3-1", "1,,2"] {
            let err = parse_cpu_list("-a", text, &EIGHT).expect_err(text);
            assert!(err.starts_with("-a "), "{err}");
        }
        let err = parse_cpu_list("-a", "9", &[0, 1]).expect_err("not ours");
        assert!(err.contains("CPU 9") && err.contains("0,1"), "{err}");
    }
}
