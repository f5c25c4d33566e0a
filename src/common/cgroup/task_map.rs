//! The cgroup `--cgroup` names, handed to the kernel for the tasks' side of the filter: a
//! one-slot cgroup array (`task_cgroup` in `lib/task_filter.bpf.h`) holding the cgroup's
//! directory, so that a program asks `bpf_current_task_under_cgroup` whether the running task
//! lies in it. One helper call instead of the five or six loads of the CO-RE walk
//! (task->cgroups->dfl_cgrp, its level, its ancestor's id), which a bio's or a depth's cgroup
//! still takes (`lib/cgroup.bpf.h`).

use std::os::fd::AsFd as _;

use anyhow::{Context as _, Result};
use libbpf_rs::{MapCore as _, MapFlags, MapHandle, MapType, OpenMapMut};

use super::CgroupFilter;

/// Makes the object's `task_cgroup` map a cgroup array holding `filter`'s cgroup, before the
/// object is loaded (the map is then never seen empty by a running program). Without a filter
/// the object's own empty map stays: the programs do not consult it.
pub fn fill_task_cgroup_map(map: &mut OpenMapMut, filter: Option<&CgroupFilter>) -> Result<()> {
    let Some(filter) = filter else {
        return Ok(());
    };
    let what = || format!("handing cgroup {} to the kernel", filter.path.display());
    let dir = std::fs::File::open(&filter.path).with_context(what)?;
    let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
        ..Default::default()
    };
    let array = MapHandle::create(MapType::CgroupArray, Some("task_cgroup"), 4, 4, 1, &opts)
        .with_context(what)?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&dir) as u32;
    array
        .update(&0u32.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
        .with_context(what)?;
    // libbpf keeps a duplicate of the fd: the array lives as long as the object.
    map.reuse_fd(array.as_fd()).with_context(what)
}
