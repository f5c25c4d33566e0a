//! A file's path from what the kernel side keeps of it (its device and the names of its dentries
//! up to its filesystem's root): the mount point of that device, from /proc/self/mountinfo,
//! joined to the path inside the filesystem.

use std::fs;

/// The mounts of this mount namespace: (kernel dev_t, root inside the filesystem, mount point).
pub struct Mounts(Vec<(u32, String, String)>);

/// mountinfo escapes spaces, tabs, newlines and backslashes as octal (`\040`).
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(b) => {
                out.push(b as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

impl Mounts {
    pub fn load() -> Mounts {
        Mounts::parse(&fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
    }

    pub fn parse(mountinfo: &str) -> Mounts {
        let mut mounts = Vec::new();
        for line in mountinfo.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let (Some(devno), Some(root), Some(point)) = (f.get(2), f.get(3), f.get(4)) else {
                continue;
            };
            let Some((major, minor)) = devno.split_once(':') else {
                continue;
            };
            let (Ok(major), Ok(minor)) = (major.parse::<u32>(), minor.parse::<u32>()) else {
                continue;
            };
            mounts.push(((major << 20) | minor, unescape(root), unescape(point)));
        }
        Mounts(mounts)
    }

    /// The path of a file of device `dev` whose dentry names are `names`, leaf first (empty
    /// after the last; all of them full: a deeper path, shown as `.../` and its last ones). Where the device is mounted more than once, the mount of its root is
    /// preferred; a file outside every mount of its device is shown as `[major:minor]/path`.
    pub fn path(&self, dev: u32, names: &[String]) -> String {
        let inner: Vec<&str> = names
            .iter()
            .take_while(|n| !n.is_empty())
            .map(String::as_str)
            .collect();
        let inside = format!(
            "/{}",
            inner.iter().rev().copied().collect::<Vec<_>>().join("/")
        );
        // Every slot full: the walk may have stopped short of the filesystem's root.
        if !inner.is_empty() && inner.len() == names.len() {
            return format!("...{inside}");
        }
        let mut best: Option<(usize, &str, &str)> = None;
        for (d, root, point) in &self.0 {
            if *d != dev {
                continue;
            }
            let within = root == "/"
                || inside == *root
                || inside.starts_with(&format!("{}/", root.trim_end_matches('/')));
            if within && best.is_none_or(|(len, _, _)| root.len() < len) {
                best = Some((root.len(), root, point));
            }
        }
        match best {
            Some((_, root, point)) => {
                let rel = if root == "/" {
                    inside.as_str()
                } else {
                    &inside[root.trim_end_matches('/').len()..]
                };
                let point = point.trim_end_matches('/');
                if rel.is_empty() || rel == "/" {
                    if point.is_empty() {
                        "/".into()
                    } else {
                        point.into()
                    }
                } else {
                    format!("{point}{rel}")
                }
            }
            None => format!("[{}:{}]{inside}", dev >> 20, dev & 0xfffff),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "22 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw
40 22 7:0 / /mnt/my\\040data rw - ext4 /dev/loop0 rw
41 22 7:0 /sub /srv rw - ext4 /dev/loop0 rw";

    fn names(leaf_first: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = leaf_first.iter().map(|s| s.to_string()).collect();
        v.push(String::new());
        v
    }

    #[test]
    fn a_file_is_named_under_its_filesystems_mount_point() {
        let m = Mounts::parse(MOUNTINFO);
        assert_eq!(m.path(7 << 20, &names(&["f", "dir"])), "/mnt/my data/dir/f");
        assert_eq!(
            m.path((254 << 20) | 1, &names(&["passwd", "etc"])),
            "/etc/passwd"
        );
    }

    #[test]
    fn a_path_deeper_than_the_kernel_side_walks_says_so() {
        let m = Mounts::parse(MOUNTINFO);
        let deep: Vec<String> = ["f", "e", "d"].iter().map(|s| s.to_string()).collect();
        assert_eq!(m.path(7 << 20, &deep), ".../d/e/f");
    }

    #[test]
    fn a_file_of_an_unmounted_device_keeps_its_device() {
        let m = Mounts::parse(MOUNTINFO);
        assert_eq!(m.path((8 << 20) | 3, &names(&["f"])), "[8:3]/f");
    }
}
