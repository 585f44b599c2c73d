//! CPU masks as the affinity calls take them: 64-bit words, CPU `n` at bit
//! `n % 64` of word `n / 64` (Linux's and FreeBSD's layout; Windows' one
//! word).

use std::io;

/// The largest CPU number a mask is built for: 2^16 CPUs, more than any
/// machine has (Linux's NR_CPUS is at most 8192).
pub(crate) const MAX_CPUS: usize = 1 << 16;

/// The mask of `cpus`, just large enough for the highest: an error naming
/// an empty list or a CPU beyond any machine's.
pub(crate) fn cpu_mask(cpus: &[usize]) -> io::Result<Vec<u64>> {
    let Some(&highest) = cpus.iter().max() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no CPU to run on: give at least one",
        ));
    };
    if highest >= MAX_CPUS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {highest} does not exist: CPUs are numbered below {MAX_CPUS}"),
        ));
    }
    let mut mask = vec![0u64; highest / 64 + 1];
    for &cpu in cpus {
        mask[cpu / 64] |= 1 << (cpu % 64);
    }
    Ok(mask)
}

/// The error of a refused pin to `cpus`: the OS's last error, naming them.
pub(crate) fn pin_refused(cpus: &[usize]) -> io::Error {
    let error = io::Error::last_os_error();
    io::Error::new(
        error.kind(),
        format!("cannot run on CPUs {cpus:?}: {error}"),
    )
}

/// Keeps the calling thread on `cpus` through `set` (a `sched_setaffinity`
/// of Linux or the BSDs, given the mask): the OS ignores CPUs that do not
/// exist, and refuses a mask with none it can use.
#[cfg(unix)]
pub(crate) fn pin_affinity(
    cpus: &[usize],
    set: impl FnOnce(&[u64]) -> libc::c_int,
) -> io::Result<()> {
    if set(&cpu_mask(cpus)?) == 0 {
        Ok(())
    } else {
        Err(pin_refused(cpus))
    }
}

/// The CPU the calling thread runs on: `sched_getcpu`, which the OSes with
/// these masks share (Linux, Android, FreeBSD, DragonFly).
#[cfg(unix)]
pub(crate) fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes nothing and returns a number (-1 on error).
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// An affinity mask as `read` (a `sched_getaffinity` of Linux or the BSDs)
/// fills it: 1024 CPUs to start with, doubled while the OS refuses a mask
/// smaller than its own (with an errno of `too_small`: Linux's EINVAL,
/// FreeBSD's ERANGE). `call` names the call in the error.
#[cfg(unix)]
pub(crate) fn read_affinity(
    call: &str,
    too_small: &[i32],
    mut read: impl FnMut(&mut [u64]) -> libc::c_int,
) -> io::Result<Vec<usize>> {
    let mut mask = vec![0u64; 16];
    loop {
        if read(&mut mask) == 0 {
            return Ok(cpus_in(&mask));
        }
        let errno = io::Error::last_os_error().raw_os_error();
        if !errno.is_some_and(|e| too_small.contains(&e)) || mask.len() * 64 >= MAX_CPUS {
            return Err(super::last_error(call));
        }
        mask = vec![0u64; mask.len() * 2];
    }
}

/// The CPU numbers set in `mask`, in increasing order.
pub(crate) fn cpus_in(mask: &[u64]) -> Vec<usize> {
    mask.iter()
        .enumerate()
        .flat_map(|(i, &word)| {
            (0..64)
                .filter(move |bit| word & (1 << bit) != 0)
                .map(move |bit| i * 64 + bit)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_name_their_cpus() {
        let mask = [0b101, 0, 1 << 63];
        assert_eq!(cpu_mask(&[191, 0, 2]).expect("CPUs"), mask);
        assert_eq!(cpus_in(&mask), [0, 2, 191]);
        assert_eq!(cpus_in(&[]), Vec::<usize>::new());
        let error = cpu_mask(&[]).expect_err("an empty set");
        assert!(error.to_string().contains("no CPU"), "{error}");
        let error = cpu_mask(&[MAX_CPUS]).expect_err("no machine has that CPU");
        assert!(
            error.to_string().contains(&format!("CPU {MAX_CPUS}")),
            "{error}"
        );
    }
}
