//! A daemon's shared page, mapped read-only and read with loads: made with
//! system calls alone (`open`, `fstat`, `mmap`, `close`, the path a
//! constant C string), so that a read of the bounds may map it in a signal
//! handler, and read with atomic loads of whole words, as the daemon's
//! writer stores them under its generation count (a seqlock).

use std::ffi::CStr;
use std::io;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// A read-only shared mapping of the first `words` words of a file.
pub(crate) struct Mapping {
    base: *const AtomicU64,
    words: usize,
}

// SAFETY: the mapping is only read, with atomic loads, and unmapped once by
// its owner's drop.
unsafe impl Send for Mapping {}
// SAFETY: as for Send: shared, it is only loaded from.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `words` 8-byte words of the file at `path`.
    ///
    /// # Errors
    /// The OS's errno (no such file: no daemon), or `InvalidData` when the
    /// file is a regular one shorter than that (a page being made): a word
    /// past the file's end would be a SIGBUS. A device's page (VMClock's)
    /// states no size.
    pub(crate) fn open(path: &CStr, words: usize) -> io::Result<Mapping> {
        let len = words * 8;
        // SAFETY: opens a NUL-terminated path, read only.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fstat writes into our zeroed stat; mmap maps `len` bytes
        // of our own descriptor read-only, which close leaves mapped.
        let base = unsafe {
            let mut stat: libc::stat = std::mem::zeroed();
            let base = if libc::fstat(fd, &mut stat) < 0 {
                Err(io::Error::last_os_error())
            } else if stat.st_mode & libc::S_IFMT == libc::S_IFREG
                && (stat.st_size as u64) < len as u64
            {
                Err(io::Error::from(io::ErrorKind::InvalidData))
            } else {
                let base = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    fd,
                    0,
                );
                if base == libc::MAP_FAILED {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(base)
                }
            };
            libc::close(fd);
            base?
        };
        Ok(Mapping {
            base: base.cast::<AtomicU64>().cast_const(),
            words,
        })
    }

    /// The mapping's base, mapped for the rest of the process's life
    /// (never unmapped: readers anywhere may load from it).
    pub(crate) fn leak(self) -> *const AtomicU64 {
        let base = self.base;
        std::mem::forget(self);
        base
    }

    /// The mapping [`leak`](Mapping::leak) gave `base` for, `words` long.
    ///
    /// # Safety
    /// `base` is what `leak` returned for a mapping of `words` words.
    pub(crate) unsafe fn leaked(base: *const AtomicU64, words: usize) -> ManuallyDrop<Mapping> {
        ManuallyDrop::new(Mapping { base, words })
    }

    /// Word `at`, loaded with `order` (0 past the mapping).
    #[inline]
    pub(crate) fn load(&self, at: usize, order: Ordering) -> u64 {
        if at >= self.words {
            return 0;
        }
        // SAFETY: within the mapping (checked), page-aligned plus a
        // multiple of 8; the daemon's writer changes it only with stores of
        // whole words, which an atomic load may race.
        unsafe { (*self.base.add(at)).load(order) }
    }

    /// The first `N` words, as the writer's sequence word `sequence` (a
    /// word index) and `stable` (its value's test: even and not zero, the
    /// writer's way) say one whole write left them; `None` if the writer
    /// wrote at each of a few tries, or the mapping is shorter than `N`.
    /// Loads only: never waits.
    pub(crate) fn read<const N: usize>(
        &self,
        sequence: usize,
        stable: impl Fn(u64) -> bool,
    ) -> Option<[u64; N]> {
        if N > self.words || sequence >= N {
            return None;
        }
        for _ in 0..4 {
            let before = self.load(sequence, Ordering::Acquire);
            if !stable(before) {
                core::hint::spin_loop();
                continue;
            }
            let words: [u64; N] = std::array::from_fn(|at| self.load(at, Ordering::Relaxed));
            fence(Ordering::Acquire);
            if self.load(sequence, Ordering::Relaxed) == before {
                return Some(words);
            }
        }
        None
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps our own mapping, once, of the length mapped.
        unsafe { libc::munmap(self.base.cast_mut().cast(), self.words * 8) };
    }
}

/// A daemon's page at a path, as the bounds' steps look at it: mapped at
/// the first look, forgotten when it holds nothing readable or
/// [`unmap`](Page::unmap)ped (stale), so that the next look maps the file
/// a restarted daemon made.
pub(crate) struct Page {
    path: &'static CStr,
    mapping: Option<Mapping>,
}

impl Page {
    pub(crate) const fn new(path: &'static CStr) -> Page {
        Page {
            path,
            mapping: None,
        }
    }

    /// What `parse` makes of the page's first `N` words, read whole under
    /// the sequence word `sequence` (see [`Mapping::read`]); `None` where
    /// there is no page or it holds nothing.
    pub(crate) fn look<const N: usize, T>(
        &mut self,
        sequence: usize,
        stable: impl Fn(u64) -> bool,
        parse: impl FnOnce(&[u64; N]) -> Option<T>,
    ) -> Option<T> {
        if self.mapping.is_none() {
            self.mapping = Mapping::open(self.path, N).ok();
        }
        let found = self
            .mapping
            .as_ref()?
            .read::<N>(sequence, stable)
            .and_then(|w| parse(&w));
        if found.is_none() {
            self.unmap();
        }
        found
    }

    /// Forgets the mapping.
    pub(crate) fn unmap(&mut self) {
        self.mapping = None;
    }
}

/// Whether ClockBound's header word (its second: size, version,
/// generation) says a whole write is there: its generation (the last u16)
/// even and not 0, the writer's way (ClockBound 2's page and 3's alike).
pub(crate) fn clockbound_written(word: u64) -> bool {
    let [.., low, high] = word.to_ne_bytes();
    let generation = u16::from_ne_bytes([low, high]);
    generation % 2 == 0 && generation != 0
}

/// `words` as the bytes they hold, in the CPU's byte order.
pub(crate) fn bytes<const N: usize, const B: usize>(words: &[u64; N]) -> [u8; B] {
    let mut bytes = [0u8; B];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "maps a file")]
    fn a_file_is_mapped_and_read_whole_and_a_short_one_refused() {
        let path = std::env::temp_dir().join(format!("timehands-mapping-{}", std::process::id()));
        let words: Vec<u8> = (1u64..=4).flat_map(u64::to_ne_bytes).collect();
        std::fs::write(&path, &words).expect("a temporary file");
        let c = std::ffi::CString::new(path.to_str().expect("UTF-8")).expect("no NUL");
        let mapping = Mapping::open(&c, 4).expect("mapped");
        assert_eq!(mapping.read::<4>(1, |w| w == 2), Some([1, 2, 3, 4]));
        assert_eq!(mapping.read::<4>(0, |w| w % 2 == 0), None, "odd: writing");
        assert_eq!(mapping.read::<5>(1, |_| true), None, "past the mapping");
        assert_eq!(bytes::<2, 16>(&[1, 2])[8..], 2u64.to_ne_bytes());
        let short = Mapping::open(&c, 5).err().expect("refused");
        assert_eq!(short.kind(), io::ErrorKind::InvalidData);
        std::fs::remove_file(&path).expect("removed");
        let absent = Mapping::open(&c, 4).err().expect("absent");
        assert_eq!(absent.kind(), io::ErrorKind::NotFound);
    }
}
