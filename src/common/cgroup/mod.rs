//! cgroup v2: which cgroup to trace (`--cgroup`, `filter`), and whose a histogram is
//! (`--per-cgroup`, `names`: ids back to paths).

pub mod filter;
pub mod names;

pub use filter::{Cgroup2Mount, CgroupFilter};
pub use names::{per_cgroup_entries, CgroupNames, PER_CGROUP_ROOM};

/// `--cgroup` and `--per-cgroup`, as a block tool is asked for them.
#[derive(Clone, Debug, Default)]
pub struct CgroupOptions {
    /// `--cgroup`: only what is charged to this cgroup.
    pub filter: Option<CgroupFilter>,
    /// `--per-cgroup DEPTH`: split by the cgroup charged, at that depth.
    pub per_cgroup: Option<u32>,
}
