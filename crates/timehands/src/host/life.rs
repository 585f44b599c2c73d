//! What the steps of the clock's life keep between them, under the
//! steering lock: the facts `info` reports of the counter choice, a choice
//! being measured, and a move of the readers waiting for its point
//! (`handover.rs` takes the steps; `clock.rs` holds their memory).

use super::choice::{Choice, KeptVerdicts, Settling};
use super::steer::Steering;
use super::text::Text;
use crate::BinTime;

/// What `info` reports of the counter choice.
#[derive(Clone, Copy)]
pub(super) struct Facts {
    pub(super) frequency_source: Text,
    pub(super) verdicts: KeptVerdicts,
    pub(super) fallback: Option<Text>,
    /// Whether the counter was trusted on its own evidence (see
    /// `choice::Trust`): then the cross-CPU check must pass. Only a TSC
    /// is (the generic timer needs no check), hence the allowance.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) own_evidence: bool,
}

impl Facts {
    /// What `choice` says of itself.
    pub(super) fn of(choice: &Choice) -> Facts {
        Facts {
            frequency_source: choice.frequency_source,
            verdicts: choice.verdicts,
            fallback: choice.fallback,
            own_evidence: choice.own_evidence.is_some(),
        }
    }
}

/// What the steps of the clock's life keep between them: the facts of the
/// choice for `info`, a choice being measured, and a move of the readers
/// waiting for its point. Taken only under the steering lock (so never
/// waited for: whoever holds it holds the steering too), and with it by a
/// fork.
pub(super) struct Life {
    pub(super) facts: Facts,
    pub(super) settling: Option<Settling>,
    pub(super) pending: Option<Pending>,
    /// Whether the kernel's clock was chosen only for want of the cross-CPU
    /// check, which a TSC trusted on its own evidence needs.
    pub(super) awaits_check: bool,
}

/// A successor set up by `HostClock::hand_over`: its stage, the count at
/// which its time reaches the retired timekeeper's retire point (CLOCK_MONOTONIC
/// reaches it there), and that time.
#[derive(Clone, Copy, Debug)]
pub(super) struct Successor {
    pub(super) stage: usize,
    pub(super) due: u64,
    pub(super) begins: BinTime,
}

/// A move to the chosen counter, waiting for its point: the readers stay on
/// the retired timekeeper until the successor's counter reaches `due`,
/// then the steering and the facts for `info` take over with them.
pub(super) struct Pending {
    pub(super) successor: Successor,
    pub(super) steering: Steering,
    pub(super) facts: Facts,
}
