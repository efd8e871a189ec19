//! A V8 version as its own `v8::internal::Version` symbols hold it.

/// `major.minor.build.patch`, e.g. 13.6.233.17 (Node 24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct V8Version {
    pub major: u32,
    pub minor: u32,
    pub build: u32,
    pub patch: u32,
}

impl V8Version {
    pub const fn new(major: u32, minor: u32, build: u32, patch: u32) -> Self {
        V8Version { major, minor, build, patch }
    }

    /// Plausible numbers: a foreign object that happens to define the names
    /// holds anything.
    pub fn is_plausible(&self) -> bool {
        (1..=99).contains(&self.major) && self.minor <= 99 && self.build <= 9999 && self.patch <= 9999
    }
}

impl std::fmt::Display for V8Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "V8 {}.{}.{}.{}", self.major, self.minor, self.build, self.patch)
    }
}
