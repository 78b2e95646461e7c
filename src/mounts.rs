//! The mount table (`/proc/self/mountinfo`): which file system holds a
//! path, and which are mounted inside a root. The walk leaves out the
//! kernel's own file systems (proc, sysfs...), and the daemon watches
//! for mounts and unmounts and rescans network file systems
//! (`watch::Mounts`).

use std::path::{Path, PathBuf};

/// Where the mount table is read from: `/proc/self/mountinfo`, or the
/// file that `SIMD_TEST_MOUNTINFO` names (tests).
pub(crate) fn table_path() -> PathBuf {
    std::env::var_os("SIMD_TEST_MOUNTINFO").map_or_else(|| PathBuf::from("/proc/self/mountinfo"), PathBuf::from)
}

/// The mount table's text; empty where it cannot be read (no /proc).
pub(crate) fn read_table() -> String {
    std::fs::read_to_string(table_path()).unwrap_or_default()
}

/// The lines of `mountinfo`'s text (`proc_pid_mountinfo(5)`) as (mount
/// id, mount point, file system type), in the table's order; a line
/// without those fields is skipped.
pub(crate) fn table(mountinfo: &str) -> impl Iterator<Item = (u64, PathBuf, &str)> {
    mountinfo.lines().filter_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let sep = fields.iter().position(|&f| f == "-")?;
        let id = fields.first()?.parse().ok()?;
        Some((id, unescape(fields.get(4)?), *fields.get(sep + 1)?))
    })
}

/// The id of the mount whose mount point is `path` (the last, on top, of
/// those mounted there), if one is.
pub(crate) fn mount_at(mountinfo: &str, path: &Path) -> Option<u64> {
    table(mountinfo).filter(|(_, point, _)| point == path).last().map(|(id, _, _)| id)
}

/// The mounts of `mountinfo` whose mount point is strictly inside `root`
/// (a root's own mount is not one), in the table's order.
pub(crate) fn inside<'a>(mountinfo: &'a str, root: &'a Path) -> impl Iterator<Item = (u64, PathBuf, &'a str)> {
    table(mountinfo).filter(move |(_, point, _)| point.starts_with(root) && point != root)
}

/// The type of the file system holding `path`: that of the mount with the
/// longest mount point above it; of two at one point, the later (mounted
/// on top).
pub(crate) fn fs_type<'a>(mountinfo: &'a str, path: &Path) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for (_, point, fstype) in table(mountinfo) {
        let depth = point.components().count();
        if path.starts_with(&point) && best.is_none_or(|(d, _)| depth >= d) {
            best = Some((depth, fstype));
        }
    }
    best.map(|(_, t)| t)
}

/// File systems the kernel makes up as they are read: a file's size says
/// nothing of what reading it gives (most of /proc's files are of size 0,
/// sysfs's of 4,096 and shorter), and /proc/kcore has the size of the
/// address space. Not documents: the walk leaves them out.
const KERNEL: [&str; 18] = [
    "proc",
    "sysfs",
    "devpts",
    "debugfs",
    "tracefs",
    "securityfs",
    "cgroup",
    "cgroup2",
    "pstore",
    "bpf",
    "configfs",
    "efivarfs",
    "fusectl",
    "binfmt_misc",
    "mqueue",
    "nsfs",
    "selinuxfs",
    "rpc_pipefs",
];

/// Whether `fstype` is one of the kernel's own file systems ([`KERNEL`]).
pub(crate) fn is_kernel(fstype: &str) -> bool {
    KERNEL.contains(&fstype)
}

/// The mount points strictly inside `root` that hold a kernel file system
/// ([`is_kernel`]; not one a later mount covers), with its type; not those
/// inside another of them (the cgroup mounts under /sys), which a walk
/// leaving out the outer one never meets.
pub(crate) fn kernel_mounts_inside(mountinfo: &str, root: &Path) -> Vec<(PathBuf, String)> {
    let mut found: Vec<(PathBuf, String)> = Vec::new();
    for (_, point, _) in inside(mountinfo, root) {
        if !found.iter().any(|(p, _)| *p == point) {
            if let Some(t) = fs_type(mountinfo, &point).filter(|t| is_kernel(t)) {
                found.push((point, t.to_string()));
            }
        }
    }
    let all: Vec<PathBuf> = found.iter().map(|(p, _)| p.clone()).collect();
    found.retain(|(p, _)| !all.iter().any(|q| q != p && p.starts_with(q)));
    found
}

/// Pairs of paths inside the roots that may be one directory under two
/// names: a bind mount (`mount --bind a b`, or a second mount of one file
/// system) shows at its mount point a directory of a file system that is
/// also mounted elsewhere. For each mount B whose point is at or inside a
/// root, and each other mount A of the same device whose root (the
/// directory of the file system it shows) is at or above B's: B's point is
/// also A's point joined with the rest of B's root. A pair with one path
/// inside the other (a tree bound inside itself) is left out; each pair is
/// listed once, its paths in byte order, and the list sorted. Candidates
/// only: the caller compares the two directories' (device, inode), which
/// also rules out a directory that a later mount covers.
pub(crate) fn twin_candidates(mountinfo: &str, roots: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    // (device, root in its file system, mount point) of each mount.
    let mounts: Vec<(&str, PathBuf, PathBuf)> = mountinfo
        .lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let (_, _, dev, root, point) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
            Some((dev, unescape(root), unescape(point)))
        })
        .collect();
    let in_roots = |p: &Path| roots.iter().any(|r| p.starts_with(r));
    let mut pairs = Vec::new();
    for (i, (dev, root_b, point_b)) in mounts.iter().enumerate() {
        if !in_roots(point_b) {
            continue;
        }
        for (j, (dev_a, root_a, point_a)) in mounts.iter().enumerate() {
            if i == j || dev != dev_a {
                continue;
            }
            let Ok(rest) = root_b.strip_prefix(root_a) else { continue };
            let other = if rest.as_os_str().is_empty() { point_a.clone() } else { point_a.join(rest) };
            if other.starts_with(point_b) || point_b.starts_with(&other) || !in_roots(&other) {
                continue;
            }
            let pair = if crate::scan::path_bytes(&other) < crate::scan::path_bytes(point_b) {
                (other, point_b.clone())
            } else {
                (point_b.clone(), other)
            };
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    pairs.sort();
    pairs
}

/// A mount point as `mountinfo` writes it, with space, tab, newline and
/// backslash escaped as three octal digits.
pub(crate) fn unescape(s: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |v, c| v.wrapping_mul(8).wrapping_add(c - b'0')));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
22 27 0:21 / /proc rw,relatime - proc proc rw
23 22 0:30 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw
24 27 0:22 / /sys rw - sysfs sysfs rw
25 24 0:23 / /sys/kernel/tracing rw - tracefs tracefs rw
40 27 0:45 / /srv/my\\040docs rw - ext4 /dev/sdb1 rw
41 40 0:46 / /srv/my\\040docs/proc rw - proc proc rw
42 40 0:47 / /srv/my\\040docs/proc rw - ext4 /dev/sdc1 rw
";

    #[test]
    fn the_deepest_and_latest_mount_holds_a_path() {
        let t = |p: &str| fs_type(MOUNTINFO, Path::new(p));
        assert_eq!(t("/proc/self/status"), Some("proc"));
        assert_eq!(t("/proc"), Some("proc"));
        assert_eq!(t("/procs"), Some("ext4"));
        assert_eq!(t("/sys/kernel/tracing/trace"), Some("tracefs"));
        assert_eq!(t("/srv/my docs/a.txt"), Some("ext4"));
        // Mounted over a proc: the later mount holds it.
        assert_eq!(t("/srv/my docs/proc/a.txt"), Some("ext4"));
        assert_eq!(mount_at(MOUNTINFO, Path::new("/srv/my docs/proc")), Some(42));
        assert_eq!(mount_at(MOUNTINFO, Path::new("/srv/my docs/a")), None);
        assert_eq!(fs_type("", Path::new("/proc")), None);
    }

    #[test]
    fn kernel_file_systems_inside_a_root_are_found() {
        let inside = |r: &str| kernel_mounts_inside(MOUNTINFO, Path::new(r));
        let m = |p: &str, t: &str| (PathBuf::from(p), t.to_string());
        // Those inside another are not listed: a walk never meets them.
        assert_eq!(inside("/"), [m("/proc", "proc"), m("/sys", "sysfs")]);
        // Strictly inside; and one a disk is mounted over is no longer there.
        assert_eq!(inside("/proc"), [m("/proc/sys/fs/binfmt_misc", "binfmt_misc")]);
        assert_eq!(inside("/srv"), []);
        assert!(is_kernel("proc") && is_kernel("sysfs") && !is_kernel("ext4") && !is_kernel("tmpfs"));
    }

    #[test]
    fn directories_shown_twice_by_bind_mounts_are_paired() {
        const BINDS: &str = "\
27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
50 27 8:1 /srv/docs/src /srv/docs/view rw - ext4 /dev/sda1 rw
51 27 8:1 /srv/docs/src /srv/docs/view2 rw - ext4 /dev/sda1 rw
52 27 0:50 / /mnt/disk rw - ext4 /dev/sdb1 rw
53 27 0:50 /a /srv/docs/disk\\040a rw - ext4 /dev/sdb1 rw
55 27 0:51 / /srv/docs/tmp rw - tmpfs none rw
";
        let pairs = |roots: &[&str]| {
            let roots: Vec<PathBuf> = roots.iter().map(PathBuf::from).collect();
            twin_candidates(BINDS, &roots)
                .into_iter()
                .map(|(a, b)| format!("{} = {}", a.display(), b.display()))
                .collect::<Vec<_>>()
        };
        // Each pair once, with the third name of the same directory; a
        // file system mounted once (`tmp`) makes no pair.
        assert_eq!(
            pairs(&["/srv/docs"]),
            ["/srv/docs/src = /srv/docs/view", "/srv/docs/src = /srv/docs/view2", "/srv/docs/view = /srv/docs/view2"]
        );
        // Both names must be inside the roots.
        assert_eq!(pairs(&["/srv/docs/view"]), Vec::<String>::new());
        assert_eq!(pairs(&["/srv/docs/view", "/srv/docs/src"]), ["/srv/docs/src = /srv/docs/view"]);
        assert_eq!(pairs(&["/srv/docs", "/mnt"])[0], "/mnt/disk/a = /srv/docs/disk a");
        assert_eq!(twin_candidates("", &[PathBuf::from("/")]), Vec::<(PathBuf, PathBuf)>::new());
        // A tree bound inside itself would make every path a twin of a
        // longer one, without end.
        let inside_itself =
            "27 1 8:1 / / rw - ext4 /dev/sda1 rw\n54 27 8:1 /srv/docs /srv/docs/loop rw - ext4 /dev/sda1 rw";
        assert_eq!(twin_candidates(inside_itself, &[PathBuf::from("/srv")]), Vec::<(PathBuf, PathBuf)>::new());
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape(r"/a\040b\011c\134d"), PathBuf::from("/a b\tc\\d"));
        assert_eq!(unescape(r"/x\04"), PathBuf::from(r"/x\04"));
    }
}
