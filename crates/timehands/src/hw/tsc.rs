//! The x86_64 time-stamp counter, and what CPUID says about it.
//!
//! `rdtsc` alone may execute before the loads and stores ahead of it retire, so
//! a bare read can see the counter earlier than a value another thread handed
//! over; the engine's ordering contract needs a fenced read. There are two:
//! `rdtscp`, which waits for the instructions before it, and `lfence; rdtsc`.
//! Which is cheaper depends on the CPU (and on the hypervisor), so [`Tsc::new`]
//! measures both.
//!
//! The fences order the CPU. The ordered read and `order_after_read` also
//! carry a compiler fence, which costs no instruction, so that the compiler's
//! ordering of memory accesses around the read is stated rather than left to
//! how it models the intrinsics.

use core::arch::x86_64::{__cpuid_count, __rdtscp, _mm_lfence, _rdtsc, CpuidResult};
use core::hint::black_box;
use core::sync::atomic::{Ordering, compiler_fence};

use crate::Counter;

/// Batches [`Tsc::new`] times of each fenced read; the fastest batch counts.
const COST_BATCHES: u32 = 3;
/// Reads in one batch: enough to make the two reads that time it negligible,
/// few enough that the six batches take some tens of microseconds where a
/// hypervisor makes a read cost 25 ns.
const READS_PER_BATCH: u64 = 256;

/// CPUID `leaf`, `sub_leaf`.
// `__cpuid_count` is a safe function in recent Rust, an unsafe one in 1.85,
// which the crate supports: hence the allowance.
#[allow(unused_unsafe)]
#[inline]
fn cpuid(leaf: u32, sub_leaf: u32) -> CpuidResult {
    // SAFETY: CPUID exists on every x86_64 CPU; an unsupported leaf returns
    // zeros or another leaf's data, never faults, and the callers check the
    // maximum leaves before they trust one.
    unsafe { __cpuid_count(leaf, sub_leaf) }
}

/// `lfence`: the instructions after it start only when those before it have
/// completed (loads included).
#[inline]
fn lfence() {
    // SAFETY: `lfence` is SSE2, which every x86_64 CPU has.
    unsafe { _mm_lfence() }
}

/// A bare `rdtsc`.
#[inline]
pub(crate) fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` exists on every x86_64 CPU, and Linux lets user space run
    // it (CR4.TSD clear) unless a process asks otherwise with `prctl`.
    unsafe { _rdtsc() }
}

/// `lfence; rdtsc`: the counter read after every earlier load has completed.
#[inline]
fn lfence_rdtsc() -> u64 {
    lfence();
    rdtsc()
}

/// `rdtscp`: the counter read after every earlier instruction has executed and
/// every earlier load is globally visible.
///
/// # Safety
/// The CPU must have `rdtscp` (CPUID 0x8000_0001 EDX bit 27, see [`has_rdtscp`]).
#[inline]
unsafe fn rdtscp() -> u64 {
    // The processor id it also returns is of no use here.
    let mut processor = 0;
    // SAFETY: the caller promises the instruction exists; `processor` is ours
    // to write.
    unsafe { __rdtscp(&mut processor) }
}

/// Whether CPUID says the CPU has `rdtscp`.
fn has_rdtscp() -> bool {
    cpuid(0x8000_0000, 0).eax >= 0x8000_0001 && cpuid(0x8000_0001, 0).edx & (1 << 27) != 0
}

/// Twelve bytes of a vendor string from three CPUID registers, without the NUL
/// padding hypervisors use.
fn vendor_string(registers: [u32; 3]) -> Vendor {
    let mut bytes = [0; 12];
    for (chunk, register) in bytes.chunks_exact_mut(4).zip(registers) {
        chunk.copy_from_slice(&register.to_le_bytes());
    }
    Vendor(bytes)
}

/// A vendor's name as CPUID gives it: twelve bytes of ASCII (`GenuineIntel`,
/// `KVMKVMKVM`), kept inline, so that reading the facts allocates nothing
/// (the clock reads them in whichever read chooses its counter, a signal
/// handler's maybe).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Vendor([u8; 12]);

impl Vendor {
    /// The name, without the NULs that pad a short one (`""` for bytes that
    /// are not UTF-8).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0)
            .unwrap_or_default()
            .trim_end_matches('\0')
    }

    /// Whether the name is empty (a hypervisor leaf left blank).
    pub fn is_empty(&self) -> bool {
        self.as_str().is_empty()
    }
}

impl PartialEq<&str> for Vendor {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for Vendor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for Vendor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// What CPUID says about the TSC, read by [`TscFacts::read`].
///
/// A leaf the CPU does not have reads as `None` or `false`. Under a hypervisor
/// these are what the hypervisor chose to show, not necessarily the host's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TscFacts {
    /// The CPU vendor (leaf 0), such as `"GenuineIntel"` or `"AuthenticAMD"`.
    pub vendor: Vendor,
    /// The largest basic leaf (leaf 0 EAX).
    pub max_basic_leaf: u32,
    /// The largest extended leaf (leaf 0x8000_0000 EAX).
    pub max_extended_leaf: u32,
    /// The TSC is invariant: it runs at a constant rate in every ACPI P-, C- and
    /// T-state (leaf 0x8000_0007 EDX bit 8). Linux shows this as the
    /// `constant_tsc` and `nonstop_tsc` flags.
    pub invariant: bool,
    /// `rdtscp` is available (leaf 0x8000_0001 EDX bit 27).
    pub rdtscp: bool,
    /// Leaf 0x15, the TSC to core crystal clock ratio, when the CPU has it.
    pub crystal_ratio: Option<CrystalRatio>,
    /// The processor base frequency in MHz (leaf 0x16 EAX), when the CPU has the
    /// leaf and fills it in: the frequency on the box, not a measured one.
    pub base_mhz: Option<u32>,
    /// A hypervisor says it is there (leaf 1 ECX bit 31).
    pub hypervisor: bool,
    /// The hypervisor's vendor (leaf 0x4000_0000), such as `"KVMKVMKVM"` or
    /// `"VMwareVMware"`, when one is present.
    pub hypervisor_vendor: Option<Vendor>,
    /// The TSC frequency in kHz the hypervisor states (leaf 0x4000_0010 EAX),
    /// when it has that leaf and fills it in.
    pub hypervisor_tsc_khz: Option<u32>,
}

/// CPUID leaf 0x15: the TSC runs at `crystal_hz * numerator / denominator`.
/// Any field may be 0, meaning "not enumerated".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrystalRatio {
    /// The ratio's denominator (EAX).
    pub denominator: u32,
    /// The ratio's numerator (EBX).
    pub numerator: u32,
    /// The core crystal clock in Hz (ECX); 0 on CPUs that leave it to a table of
    /// models, as some Skylake and Kaby Lake parts do.
    pub crystal_hz: u32,
}

/// Which CPUID leaf a [`StatedFrequency`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrequencySource {
    /// Leaf 0x15, crystal clock times the TSC ratio: exact up to the crystal's
    /// tolerance.
    CrystalRatio,
    /// Leaf 0x4000_0010, the hypervisor's statement of the TSC frequency in kHz.
    Hypervisor,
    /// Leaf 0x16, the base frequency in MHz: nominal, so approximate. The TSC of
    /// a CPU that lacks leaf 0x15 runs near it, but can be off by a fraction of
    /// a percent.
    NominalBase,
}

/// A TSC frequency that CPUID states, and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatedFrequency {
    /// The frequency in Hz.
    pub hz: u64,
    /// The leaf it was read from.
    pub source: FrequencySource,
}

impl StatedFrequency {
    /// Whether this is only the nominal base frequency (leaf 0x16), which the
    /// TSC may miss by a fraction of a percent: measure before trusting it.
    pub fn is_nominal(&self) -> bool {
        self.source == FrequencySource::NominalBase
    }
}

impl TscFacts {
    /// Reads the facts with CPUID on the current CPU (a few microseconds under a
    /// hypervisor, which traps every CPUID).
    pub fn read() -> TscFacts {
        let leaf0 = cpuid(0, 0);
        let max_basic_leaf = leaf0.eax;
        let max_extended_leaf = cpuid(0x8000_0000, 0).eax;
        let hypervisor = max_basic_leaf >= 1 && cpuid(1, 0).ecx & (1 << 31) != 0;
        // The hypervisor leaves exist only when the hypervisor bit says so: on
        // bare metal 0x4000_0000 returns another leaf's data.
        let hypervisor_leaf = hypervisor.then(|| cpuid(0x4000_0000, 0));
        TscFacts {
            vendor: vendor_string([leaf0.ebx, leaf0.edx, leaf0.ecx]),
            max_basic_leaf,
            max_extended_leaf,
            invariant: max_extended_leaf >= 0x8000_0007
                && cpuid(0x8000_0007, 0).edx & (1 << 8) != 0,
            rdtscp: has_rdtscp(),
            crystal_ratio: (max_basic_leaf >= 0x15).then(|| {
                let leaf = cpuid(0x15, 0);
                CrystalRatio {
                    denominator: leaf.eax,
                    numerator: leaf.ebx,
                    crystal_hz: leaf.ecx,
                }
            }),
            base_mhz: (max_basic_leaf >= 0x16)
                .then(|| cpuid(0x16, 0).eax & 0xffff)
                .filter(|&mhz| mhz != 0),
            hypervisor,
            hypervisor_vendor: hypervisor_leaf
                .map(|leaf| vendor_string([leaf.ebx, leaf.ecx, leaf.edx])),
            hypervisor_tsc_khz: hypervisor_leaf
                .filter(|leaf| leaf.eax >= 0x4000_0010)
                .map(|_| cpuid(0x4000_0010, 0).eax)
                .filter(|&khz| khz != 0),
        }
    }

    /// The TSC frequency CPUID states, if it states one: leaf 0x15 when it
    /// gives the crystal frequency, else the hypervisor's leaf, else the nominal
    /// base frequency of leaf 0x16 (see [`StatedFrequency::is_nominal`]).
    pub fn stated_frequency(&self) -> Option<StatedFrequency> {
        let crystal = self
            .crystal_ratio
            .filter(|r| r.denominator != 0 && r.numerator != 0 && r.crystal_hz != 0)
            .map(|r| StatedFrequency {
                hz: u64::from(r.crystal_hz) * u64::from(r.numerator) / u64::from(r.denominator),
                source: FrequencySource::CrystalRatio,
            });
        let hypervisor = self.hypervisor_tsc_khz.map(|khz| StatedFrequency {
            hz: u64::from(khz) * 1_000,
            source: FrequencySource::Hypervisor,
        });
        let base = self.base_mhz.map(|mhz| StatedFrequency {
            hz: u64::from(mhz) * 1_000_000,
            source: FrequencySource::NominalBase,
        });
        crystal.or(hypervisor).or(base)
    }
}

/// How [`Tsc::read`](Counter::read) orders its read after earlier memory
/// accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OrderedRead {
    /// `rdtscp`, where CPUID says the CPU has it.
    Rdtscp,
    /// `lfence; rdtsc`, on every x86_64 CPU.
    LfenceRdtsc,
}

/// What [`Tsc::new`] measured: TSC counts per fenced read, the least over a few
/// batches of some hundred reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadCost {
    /// `rdtscp`, or `None` when the CPU lacks it.
    pub rdtscp: Option<u64>,
    /// `lfence; rdtsc`.
    pub lfence_rdtsc: u64,
}

/// TSC counts per call of `read`, over one batch of [`READS_PER_BATCH`].
#[inline(never)]
fn counts_per_read(read: impl Fn() -> u64) -> u64 {
    let start = read();
    for _ in 0..READS_PER_BATCH {
        black_box(read());
    }
    read().wrapping_sub(start) / (READS_PER_BATCH + 1)
}

/// The least cost of each fenced read over [`COST_BATCHES`] rounds, so that an
/// interrupt or a preemption in one batch does not count. The two take turns,
/// so that a clock ramping up meanwhile favours neither.
fn measure_read_cost() -> ReadCost {
    let mut cost = ReadCost {
        rdtscp: has_rdtscp().then_some(u64::MAX),
        lfence_rdtsc: u64::MAX,
    };
    for _ in 0..COST_BATCHES {
        if let Some(least) = &mut cost.rdtscp {
            // SAFETY: `rdtscp` is `Some` only when CPUID says the CPU has it.
            *least = (*least).min(counts_per_read(|| unsafe { rdtscp() }));
        }
        cost.lfence_rdtsc = cost.lfence_rdtsc.min(counts_per_read(lfence_rdtsc));
    }
    cost
}

/// The x86_64 time-stamp counter as a [`Counter`].
///
/// The frequency is the caller's: the TSC does not reliably say its own. Take it
/// from [`TscFacts::stated_frequency`] or the kernel (Linux logs
/// `tsc: Refined TSC clocksource calibration`), or measure it against
/// [`KernelCounter::monotonic_raw`](super::KernelCounter::monotonic_raw).
///
/// Whether the TSC is fit to keep time is also the caller's to judge: it should
/// be [invariant](TscFacts::invariant), and synchronized across CPUs, which
/// Linux checks at boot ([`kernel_clocksource`](super::kernel_clocksource) is
/// `"tsc"` when it found the TSC good).
///
/// ```no_run
/// use timehands::Timekeeper;
/// use timehands::diagnostics::hw::{Tsc, TscFacts};
///
/// let hz = TscFacts::read().stated_frequency().expect("CPUID states the TSC frequency").hz;
/// let tk = Timekeeper::new(Tsc::new(hz))?;
/// println!("{}", tk.uptime());
/// # Ok::<(), timehands::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tsc {
    frequency: u64,
    /// Set only by the constructors, which check CPUID before they choose
    /// `Rdtscp`: `read` relies on it.
    read: OrderedRead,
    cost: Option<ReadCost>,
}

impl Tsc {
    /// The TSC at `frequency_hz`, read with whichever fenced read costs less on
    /// this CPU. Measuring takes some tens of microseconds (about 1 500 reads).
    pub fn new(frequency_hz: u64) -> Tsc {
        let cost = measure_read_cost();
        let read = match cost.rdtscp {
            Some(rdtscp) if rdtscp <= cost.lfence_rdtsc => OrderedRead::Rdtscp,
            _ => OrderedRead::LfenceRdtsc,
        };
        Tsc {
            frequency: frequency_hz,
            read,
            cost: Some(cost),
        }
    }

    /// The TSC at `frequency_hz`, read with `read`; `None` if that is
    /// [`OrderedRead::Rdtscp`] and the CPU lacks it.
    pub fn with_read(frequency_hz: u64, read: OrderedRead) -> Option<Tsc> {
        (read == OrderedRead::LfenceRdtsc || has_rdtscp()).then_some(Tsc {
            frequency: frequency_hz,
            read,
            cost: None,
        })
    }

    /// The same TSC, read the same way, at `frequency_hz` (one measured).
    pub(crate) fn at_frequency(&self, frequency_hz: u64) -> Tsc {
        Tsc {
            frequency: frequency_hz,
            ..*self
        }
    }

    /// The fenced read [`read`](Counter::read) uses.
    pub fn ordered_read(&self) -> OrderedRead {
        self.read
    }

    /// What [`Tsc::new`] measured to choose the read; `None` for a `Tsc` built by
    /// [`Tsc::with_read`].
    pub fn read_cost(&self) -> Option<ReadCost> {
        self.cost
    }
}

/// The TSC read as `read` orders it: what [`Tsc::read`](Counter::read) does,
/// for a reader that chose the read once and keeps it.
///
/// # Safety
/// `read` is [`OrderedRead::Rdtscp`] only where the CPU has `rdtscp`: as
/// [`Tsc::ordered_read`] is.
#[inline(always)]
pub(crate) unsafe fn read_ordered(read: OrderedRead) -> u64 {
    // The earlier memory accesses stay before the fenced read.
    compiler_fence(Ordering::SeqCst);
    match read {
        // SAFETY: the caller's promise.
        OrderedRead::Rdtscp => unsafe { rdtscp() },
        OrderedRead::LfenceRdtsc => lfence_rdtsc(),
    }
}

impl Counter for Tsc {
    #[inline]
    fn read(&self) -> u64 {
        // SAFETY: `read` is `Rdtscp` only when a constructor found rdtscp in
        // CPUID.
        unsafe { read_ordered(self.read) }
    }

    /// A bare `rdtsc`, with no fence: for timing an interval on one thread,
    /// never for a value compared with another thread's.
    #[inline]
    fn read_unordered(&self) -> u64 {
        rdtsc()
    }

    fn frequency(&self) -> u64 {
        self.frequency
    }

    fn name(&self) -> &str {
        "TSC"
    }

    #[inline]
    fn order_after_read(&self) {
        lfence();
        // The later memory accesses stay after the `lfence`.
        compiler_fence(Ordering::SeqCst);
    }
}
