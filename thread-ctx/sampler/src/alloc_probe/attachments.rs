//! Which `node` objects carry the allocation uprobe, for which tracked
//! processes: one attachment per object (every process mapping it shares it),
//! made when the first process of that object is tracked and dropped (so
//! detached) when the last one leaves. An object without a probe site is
//! reported once, not once per process.

use super::site::{ObjectKey, ProbeSite, ProbeSiteError, ProbeSites};
use std::collections::{BTreeSet, HashMap, HashSet};

/// Objects whose missing probe site was already reported; past this the set starts over.
const MAX_REFUSED: usize = 1024;

/// What [`ProbeAttachments::add`] did for one process.
#[derive(Debug, PartialEq, Eq)]
pub enum Added {
    /// The object's probe was attached for this process (`new`: by this call).
    Attached { new: bool, path: String },
    /// Already counted (the same pid added twice).
    AlreadyTracked,
    /// No probe for this process; `report` is the line to show, once per object (None after).
    Unavailable { report: Option<String> },
}

pub struct ProbeAttachments<L> {
    sites: ProbeSites,
    objects: HashMap<ObjectKey, Attached<L>>,
    object_of: HashMap<u32, ObjectKey>,
    refused: HashSet<String>,
}

struct Attached<L> {
    /// Dropping it detaches the uprobe.
    _link: L,
    pids: BTreeSet<u32>,
}

impl<L> Default for ProbeAttachments<L> {
    fn default() -> Self {
        ProbeAttachments { sites: ProbeSites::new(), objects: HashMap::new(), object_of: HashMap::new(), refused: HashSet::new() }
    }
}

impl<L> ProbeAttachments<L> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Covers process `pid`: finds its probe site and, for the first process of that object,
    /// attaches with `attach` (an error from it is reported like a missing site).
    pub fn add<E: std::fmt::Display>(&mut self, pid: u32, attach: impl FnOnce(&ProbeSite) -> Result<L, E>) -> Added {
        if self.object_of.contains_key(&pid) {
            return Added::AlreadyTracked;
        }
        let site = self.sites.site(pid);
        self.add_site(pid, site, attach)
    }

    /// [`add`](Self::add) with the site found elsewhere (the agent's discovery thread reads the
    /// target, so that the sampling thread never does).
    pub fn add_site<E: std::fmt::Display>(
        &mut self,
        pid: u32,
        site: Result<ProbeSite, ProbeSiteError>,
        attach: impl FnOnce(&ProbeSite) -> Result<L, E>,
    ) -> Added {
        if self.object_of.contains_key(&pid) {
            return Added::AlreadyTracked;
        }
        let site = match site {
            Ok(site) => site,
            Err(e) => return Added::Unavailable { report: self.report_once(refusal_key(&e), e.to_string()) },
        };
        let new = !self.objects.contains_key(&site.object);
        if new {
            match attach(&site) {
                Ok(link) => {
                    self.objects.insert(site.object.clone(), Attached { _link: link, pids: BTreeSet::new() });
                }
                Err(e) => {
                    return Added::Unavailable { report: self.report_once(site.object.to_string(), format!("process {pid}: {e}")) };
                }
            }
        }
        self.objects.get_mut(&site.object).expect("attached above").pids.insert(pid);
        self.object_of.insert(pid, site.object);
        Added::Attached { new, path: site.path }
    }

    /// Process `pid` is gone or no longer tracked; true when that detached its object's probe.
    pub fn remove(&mut self, pid: u32) -> bool {
        let Some(object) = self.object_of.remove(&pid) else { return false };
        let attached = self.objects.get_mut(&object).expect("every tracked pid's object is attached");
        attached.pids.remove(&pid);
        if attached.pids.is_empty() {
            self.objects.remove(&object);
            return true;
        }
        false
    }

    /// Probes attached now (one per object).
    pub fn attached(&self) -> usize {
        self.objects.len()
    }

    pub fn covers(&self, pid: u32) -> bool {
        self.object_of.contains_key(&pid)
    }

    fn report_once(&mut self, key: String, line: String) -> Option<String> {
        if self.refused.len() >= MAX_REFUSED {
            self.refused.clear();
        }
        self.refused.insert(key).then_some(line)
    }
}

/// The same object refused in every process: one line. Other failures are per process.
fn refusal_key(e: &ProbeSiteError) -> String {
    match e {
        ProbeSiteError::Symbol { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    /// A process whose executable is this test binary (no V8): one line for all of them.
    fn spawn_self() -> Child {
        Command::new(std::env::current_exe().unwrap()).arg("--list").stdout(std::process::Stdio::null()).spawn().unwrap()
    }

    #[test]
    fn an_object_without_a_probe_is_reported_once() {
        let mut a: ProbeAttachments<()> = ProbeAttachments::new();
        let me = std::process::id();
        let first = a.add(me, |_| Ok::<(), String>(()));
        let Added::Unavailable { report: Some(line) } = first else { panic!("expected one report, got {first:?}") };
        assert!(line.contains("not V8, or stripped"), "{line}");
        let mut other = spawn_self();
        // The child may already have exited (its maps then unreadable): also not attached.
        assert!(matches!(a.add(other.id(), |_| Ok::<(), String>(())), Added::Unavailable { .. }));
        let _ = other.wait();
        assert_eq!(a.add(me, |_| Ok::<(), String>(())), Added::Unavailable { report: None }, "said once");
        assert_eq!(a.attached(), 0);
        assert!(!a.covers(me) && !a.remove(me));
    }

    /// Counts live attachments: dropping one is detaching.
    struct Link(std::rc::Rc<std::cell::Cell<i32>>);
    impl Drop for Link {
        fn drop(&mut self) {
            self.0.set(self.0.get() - 1);
        }
    }

    #[test]
    fn processes_of_one_node_share_one_attachment_until_the_last_leaves() {
        let Ok(node) = which_node() else { return }; // node is on PATH wherever the package's tests run
        let spawn = || Command::new(&node).args(["-e", "setInterval(() => {}, 1000)"]).spawn().unwrap();
        let (mut p1, mut p2) = (spawn(), spawn());
        std::thread::sleep(std::time::Duration::from_millis(300)); // exec done, node mapped
        let live = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut a = ProbeAttachments::new();
        let attach = |site: &ProbeSite| -> Result<Link, std::io::Error> {
            assert!(site.attach_path.contains("/map_files/"), "{}", site.attach_path);
            live.set(live.get() + 1);
            Ok(Link(live.clone()))
        };
        assert!(matches!(a.add(p1.id(), attach), Added::Attached { new: true, .. }));
        assert!(matches!(a.add(p2.id(), attach), Added::Attached { new: false, .. }));
        assert_eq!(a.add(p2.id(), attach), Added::AlreadyTracked);
        assert_eq!((a.attached(), live.get()), (1, 1));
        assert!(!a.remove(p1.id()), "p2 still maps it");
        assert_eq!(live.get(), 1);
        assert!(a.remove(p2.id()), "the last process left: detached");
        assert_eq!((a.attached(), live.get()), (0, 0));
        let refused = a.add(p1.id(), |_| Err::<Link, _>(std::io::Error::other("the kernel said no")));
        assert!(matches!(&refused, Added::Unavailable { report: Some(l) } if l.contains("the kernel said no")), "{refused:?}");
        for p in [&mut p1, &mut p2] {
            let _ = p.kill();
            let _ = p.wait();
        }
    }

    fn which_node() -> Result<std::path::PathBuf, ()> {
        let out = Command::new("sh").args(["-c", "command -v node"]).output().map_err(|_| ())?;
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if path.is_empty() {
            return Err(());
        }
        std::fs::canonicalize(path).map_err(|_| ())
    }
}
