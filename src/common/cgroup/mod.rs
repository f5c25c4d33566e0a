//! cgroup v2: which cgroup to trace (`--cgroup`, `filter`), and whose a histogram is
//! (`--per-cgroup`, `names`: ids back to paths), and the filter's cgroup handed to the kernel
//! (`task_map`).

pub mod filter;
pub mod names;
pub mod task_map;

pub use filter::{Cgroup2Mount, CgroupFilter};
pub use names::{per_cgroup_entries, CgroupNames, PER_CGROUP_ROOM};
pub use task_map::fill_task_cgroup_map;

/// `--cgroup` and `--per-cgroup`, as a block tool is asked for them.
#[derive(Clone, Debug, Default)]
pub struct CgroupOptions {
    /// `--cgroup`: only what is charged to this cgroup.
    pub filter: Option<CgroupFilter>,
    /// `--per-cgroup DEPTH`: split by the cgroup charged, at that depth.
    pub per_cgroup: Option<u32>,
}
