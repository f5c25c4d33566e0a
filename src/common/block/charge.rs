//! Which cgroup a block I/O belongs to, for `--cgroup`: the cgroup that owns it, not the task
//! that happened to be on the CPU when it was issued or completed (peers filter with
//! `bpf_current_task_under_cgroup` in every block hook, so a database's buffered writes, issued
//! by a flusher kworker and completed in an interrupt, are never its own).
//!
//! Where the io controller is on the cgroup v2 hierarchy and enabled for the cgroup, every bio
//! carries its owner: its blkcg (`bio->bi_blkg->blkcg`), which for writeback is the cgroup that
//! dirtied the pages. It is read at completion, in the one program biolat already runs per I/O.
//! Elsewhere (the io controller on v1, as on hosts with a hybrid hierarchy, or not enabled
//! there) a bio's blkcg is no v2 cgroup, and the I/O is charged to the task that submitted it,
//! seen at block_bio_queue, which runs in the submitter on every kernel: writeback is then the
//! flusher's, in the root.

use anyhow::Result;

use crate::common::block::plan_bio_owner;
use crate::common::cgroup::{CgroupFilter, CgroupOptions};
use crate::common::kernel::plan::AttachPlan;
use crate::common::kernel::prober::Prober;

/// How I/O is charged to `--cgroup`'s cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoCharge {
    /// The request's first bio's blkcg, read at completion.
    Blkcg,
    /// The submitting task's cgroup, seen at block_bio_queue; `bio_with_queue`: that tracepoint
    /// still passes the request queue first (before 5.11).
    Submitter { bio_with_queue: bool },
}

impl IoCharge {
    pub fn by_blkcg(self) -> bool {
        self == IoCharge::Blkcg
    }

    pub fn bio_with_queue(self) -> bool {
        matches!(
            self,
            IoCharge::Submitter {
                bio_with_queue: true
            }
        )
    }
}

/// How I/O is charged here to `--cgroup`'s cgroup, or to the cgroups `--per-cgroup` splits
/// (`per_cgroup`), added to `plan` with its reason (and, for the submitter, the block_bio_queue
/// programs). None with neither.
pub fn plan_io_charge(
    prober: &Prober,
    plan: &mut AttachPlan,
    cgroups: &CgroupOptions,
) -> Result<Option<IoCharge>> {
    let root;
    let cgroup = match (cgroups.filter.as_ref(), cgroups.per_cgroup.is_some()) {
        (Some(c), _) => c,
        (None, true) => {
            root = CgroupFilter::root()?;
            &root
        }
        (None, false) => return Ok(None),
    };
    let path = cgroup.path.display();
    if cgroup.owns_its_io {
        plan.decide(
            "charged",
            format!(
                "to the blkcg of the request's bio: the io controller is on cgroup v2 and enabled for {path} (writeback is charged to the cgroup that dirtied the pages)"
            ),
        );
        return Ok(Some(IoCharge::Blkcg));
    }
    let bio_with_queue = plan_bio_owner(prober, plan)?;
    plan.decide(
        "charged",
        format!(
            "to the submitting task's cgroup: {path} has no io.stat (the io controller is on cgroup v1 here, or not enabled for it), so bios carry no v2 owner; writeback is the flusher's"
        ),
    );
    Ok(Some(IoCharge::Submitter { bio_with_queue }))
}
