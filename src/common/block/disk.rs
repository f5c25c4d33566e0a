//! Disks by name: `-d DISK` filters and `-D` labels, both from sysfs.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use anyhow::{anyhow, Result};

use crate::common::kernel::prober::read_trimmed;

/// The kernel's internal dev_t, as BPF builds it from a gendisk: `major << 20 | minor`.
pub fn kernel_dev(major: u32, minor: u32) -> u32 {
    (major << 20) | minor
}

fn parse_dev(maj_min: &str) -> Option<u32> {
    let (major, minor) = maj_min.trim().split_once(':')?;
    Some(kernel_dev(major.parse().ok()?, minor.parse().ok()?))
}

/// Whole disks known to the block layer (`/sys/block`), sorted.
pub fn disk_names() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir("/sys/block")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `-d DISK`: requests are counted only for this whole disk.
///
/// A partition is refused with advice rather than silently matching nothing (requests carry the
/// whole disk's gendisk, so `-d sda1` would never match in the kernel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskFilter {
    pub name: String,
    pub dev: u32,
}

impl DiskFilter {
    /// The disk's dev_t and its partitions' (a filesystem's device is the partition it is on).
    pub fn with_partitions(&self) -> Vec<u32> {
        let mut devs = vec![self.dev];
        let dir = Path::new("/sys/block").join(&self.name);
        if let Ok(entries) = fs::read_dir(&dir) {
            let mut parts: Vec<u32> = entries
                .flatten()
                .filter(|e| e.path().join("partition").exists())
                .filter_map(|e| {
                    read_trimmed(e.path().join("dev"))
                        .as_deref()
                        .and_then(parse_dev)
                })
                .collect();
            parts.sort_unstable();
            devs.extend(parts);
        }
        devs
    }

    /// The devices its files can be on, as a file's superblock names them (s_dev): the disk,
    /// its partitions, and the device number of each filesystem mounted from one of them where
    /// that is not the block device's own (btrfs gives every subvolume an anonymous 0:NN), from
    /// /proc/self/mountinfo.
    pub fn file_devices(&self) -> Vec<u32> {
        let mut devs = self.with_partitions();
        let names: Vec<String> = std::iter::once(self.name.clone())
            .chain(
                fs::read_dir(Path::new("/sys/block").join(&self.name))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|e| e.path().join("partition").exists())
                    .map(|e| e.file_name().to_string_lossy().into_owned()),
            )
            .collect();
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        for line in mountinfo.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let Some(sep) = fields.iter().position(|f| *f == "-") else {
                continue;
            };
            let (Some(dev), Some(source)) = (fields.get(2), fields.get(sep + 2)) else {
                continue;
            };
            let from_us = source
                .strip_prefix("/dev/")
                .is_some_and(|s| names.iter().any(|n| n == s));
            if let (true, Some(dev)) = (from_us, parse_dev(dev)) {
                if !devs.contains(&dev) {
                    devs.push(dev);
                }
            }
        }
        devs
    }

    pub fn parse(arg: &str) -> Result<DiskFilter> {
        let name = arg.strip_prefix("/dev/").unwrap_or(arg);
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(anyhow!(
                "'{arg}' is not a disk name (expected e.g. sda, nvme0n1, vda)"
            ));
        }
        if let Some(dev) = read_trimmed(format!("/sys/block/{name}/dev"))
            .as_deref()
            .and_then(parse_dev)
        {
            return Ok(DiskFilter {
                name: name.to_string(),
                dev,
            });
        }
        let class = Path::new("/sys/class/block").join(name);
        if class.join("partition").exists() {
            let parent = fs::canonicalize(&class)
                .ok()
                .and_then(|p| {
                    p.parent()
                        .and_then(|d| d.file_name())
                        .map(|n| n.to_string_lossy().into_owned())
                })
                .unwrap_or_else(|| "its disk".into());
            return Err(anyhow!(
                "{name} is a partition of {parent}: block requests are tracked per whole disk, use -d {parent}"
            ));
        }
        Err(anyhow!(
            "unknown disk '{name}'; disks here: {}",
            disk_names().join(", ")
        ))
    }
}

/// The whole disk a block device (a disk or a partition) lives on, by its /sys/class/block name.
fn whole_disk(name: &str) -> Option<String> {
    let class = Path::new("/sys/class/block").join(name);
    if !class.join("partition").exists() {
        return Some(name.to_string());
    }
    let real = fs::canonicalize(&class).ok()?;
    Some(real.parent()?.file_name()?.to_string_lossy().into_owned())
}

/// The devices reached from `name` through sysfs, a step at a time: `step` of a device gives
/// the devices to visit next and those to keep. At most 64 visits; sorted by name.
fn walk_stack(
    name: &str,
    step: impl Fn(&str) -> (Vec<String>, Vec<DiskFilter>),
) -> Vec<DiskFilter> {
    let mut out: Vec<DiskFilter> = Vec::new();
    let mut todo = vec![name.to_string()];
    let mut visited = todo.clone();
    for _ in 0..64 {
        let Some(n) = todo.pop() else { break };
        let (next, keep) = step(&n);
        for d in next {
            if !visited.contains(&d) {
                visited.push(d.clone());
                todo.push(d);
            }
        }
        for f in keep {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Whether a disk is stacked on others (it has `slaves`: dm, md, LVM's volumes).
fn has_slaves(name: &str) -> bool {
    fs::read_dir(Path::new("/sys/block").join(name).join("slaves"))
        .map(|mut d| d.next().is_some())
        .unwrap_or(false)
}

/// The whole disks under a stacked device (dm, md: `/sys/block/NAME/slaves`), followed down
/// through stacked devices to the disks whose requests carry its I/O; empty for a disk that
/// stacks on nothing.
pub fn disks_below(name: &str) -> Vec<DiskFilter> {
    walk_stack(name, |n| {
        let (mut next, mut keep) = (Vec::new(), Vec::new());
        let slaves = fs::read_dir(Path::new("/sys/block").join(n).join("slaves"));
        for e in slaves.into_iter().flatten().flatten() {
            let Some(disk) = whole_disk(&e.file_name().to_string_lossy()) else {
                continue;
            };
            if has_slaves(&disk) {
                next.push(disk);
            } else if let Ok(f) = DiskFilter::parse(&disk) {
                keep.push(f);
            }
        }
        (next, keep)
    })
}

/// The stacked devices over a disk (`/sys/block/NAME/holders`, and its partitions' holders),
/// followed up through stacked devices: the devices whose I/O ends up on the disk (a volume of
/// LVM on it, a dm-crypt device on that). Empty for a disk nothing is stacked on.
pub fn disks_above(name: &str) -> Vec<DiskFilter> {
    walk_stack(name, |n| {
        let dir = Path::new("/sys/block").join(n);
        // The disk's own holders and its partitions' (a volume group on sda2).
        let parts = fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("partition").exists())
            .map(|e| e.path());
        let keep: Vec<DiskFilter> = std::iter::once(dir.clone())
            .chain(parts)
            .flat_map(|d| {
                fs::read_dir(d.join("holders"))
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .filter_map(|e| DiskFilter::parse(&e.file_name().to_string_lossy()).ok())
            .collect();
        (keep.iter().map(|f| f.name.clone()).collect(), keep)
    })
}

/// Every stacked device here (one with slaves: dm, md, LVM's volumes), by name.
pub fn stacked_devices() -> Vec<DiskFilter> {
    disk_names()
        .into_iter()
        .filter(|n| has_slaves(n))
        .filter_map(|n| DiskFilter::parse(&n).ok())
        .collect()
}

/// dev_t → disk name, for `-D` labels.
pub struct DiskNames(HashMap<u32, String>);

impl DiskNames {
    pub fn load() -> DiskNames {
        let map = disk_names()
            .into_iter()
            .filter_map(|name| {
                let dev = read_trimmed(format!("/sys/block/{name}/dev"))
                    .as_deref()
                    .and_then(parse_dev)?;
                Some((dev, name))
            })
            .collect();
        DiskNames(map)
    }

    /// The disk's name; for a dev_t not seen yet (a disk that appeared since), sysfs is read
    /// again once; `major:minor` for a disk that went away.
    pub fn name_or_reload(&mut self, dev: u32) -> String {
        if !self.0.contains_key(&dev) {
            let fresh = DiskNames::load();
            self.0.extend(fresh.0);
            let fallback = self.name(dev);
            self.0.entry(dev).or_insert(fallback);
        }
        self.name(dev)
    }

    /// The disk's name, or `major:minor` for a disk that went away.
    pub fn name(&self, dev: u32) -> String {
        self.0
            .get(&dev)
            .cloned()
            .unwrap_or_else(|| format!("{}:{}", dev >> 20, dev & ((1 << 20) - 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_dev_layout() {
        assert_eq!(kernel_dev(7, 0), 7 << 20);
        assert_eq!(parse_dev("253:16\n"), Some((253 << 20) | 16));
        assert_eq!(parse_dev("garbage"), None);
    }

    #[test]
    fn unknown_disk_is_one_line_with_the_list() {
        let err = DiskFilter::parse("nosuchdisk").unwrap_err().to_string();
        assert!(
            err.starts_with("unknown disk 'nosuchdisk'; disks here:"),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }

    #[test]
    fn path_like_names_are_refused() {
        assert!(DiskFilter::parse("../etc").is_err());
        assert!(DiskFilter::parse("").is_err());
    }
}
