//! Which samples a drawn or folded output shows ([`Kind`]): CPU samples, off-CPU intervals, both
//! on one time scale, or allocation samples. One choice serves the flame graph, the folded
//! stacks and the summary of a `--trace`/`--span`/`--attr` selection, so that all three speak
//! of the same samples, and the flame graph's title and subtitle say which.

use thread_ctx_model::{Entry, Filter, Profile};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// CPU samples, counted.
    Cpu,
    /// Off-CPU intervals, in microseconds.
    OffCpu,
    /// CPU samples and off-CPU intervals on one scale, microseconds: a CPU sample counts as its
    /// sampling period.
    CpuAndOffCpu,
    /// Allocation samples, in the bytes they stand for.
    Alloc,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Cpu, Kind::OffCpu, Kind::CpuAndOffCpu, Kind::Alloc];

    /// What an output shows when not told: the CPU samples, with the off-CPU time beside them
    /// when the profile traced it.
    pub fn default_for(p: &Profile) -> Kind {
        if p.off_cpu_traced {
            Kind::CpuAndOffCpu
        } else {
            Kind::Cpu
        }
    }

    /// Its name on the command line (`--kind`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::OffCpu => "off-cpu",
            Kind::CpuAndOffCpu => "cpu+off-cpu",
            Kind::Alloc => "alloc",
        }
    }

    /// The entry's samples are shown.
    pub fn shows(self, e: &Entry) -> bool {
        match self {
            Kind::Cpu => e.kind.is_cpu(),
            Kind::OffCpu => e.kind.is_off_cpu(),
            Kind::CpuAndOffCpu => e.kind.is_cpu() || e.kind.is_off_cpu(),
            Kind::Alloc => e.kind.is_alloc(),
        }
    }

    /// The values are nanoseconds (shown as microseconds) rather than counts or bytes.
    pub fn is_time(self) -> bool {
        matches!(self, Kind::OffCpu | Kind::CpuAndOffCpu)
    }

    /// What an entry adds to a folded line, before [`Kind::is_time`]'s rounding to microseconds.
    pub fn value(self, e: &Entry) -> u64 {
        match self {
            Kind::Cpu => e.count,
            Kind::OffCpu | Kind::CpuAndOffCpu | Kind::Alloc => e.weight,
        }
    }

    /// The unit of a folded line's value, as the flame graph names it.
    pub fn unit(self) -> &'static str {
        match self {
            Kind::Cpu => "samples",
            Kind::OffCpu | Kind::CpuAndOffCpu => "us",
            Kind::Alloc => "bytes",
        }
    }

    /// What a folded line's value is, as the command's messages say it.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Cpu => "values are CPU samples",
            Kind::OffCpu => "values are microseconds off the CPU",
            Kind::CpuAndOffCpu => "values are microseconds: a CPU sample counts as its sampling period, off-CPU time as itself",
            Kind::Alloc => "values are allocated bytes: each allocation sample counts the bytes it stands for",
        }
    }

    /// The flame graph's title for the samples `filter` describes.
    pub fn title(self, filter: &Filter) -> String {
        let what = match self {
            Kind::Cpu => "CPU",
            Kind::OffCpu => "Off-CPU time",
            Kind::CpuAndOffCpu => "CPU and off-CPU time",
            Kind::Alloc => "Allocated bytes",
        };
        format!("{what}: {}", filter.describe())
    }

    /// What the shown samples are called in messages.
    pub fn samples_name(self) -> &'static str {
        match self {
            Kind::Cpu => "CPU samples",
            Kind::OffCpu => "off-CPU intervals",
            Kind::CpuAndOffCpu => "CPU samples and off-CPU intervals",
            Kind::Alloc => "allocation samples",
        }
    }

    /// The shown samples of `p` that `filter` keeps.
    pub fn count(self, p: &Profile, filter: &Filter) -> u64 {
        p.entries.iter().filter(|e| self.shows(e) && filter.matches(e)).map(|e| e.count).sum()
    }

    /// "37 CPU samples", "12 allocation samples standing for 4.2 MB", "40 CPU samples and 3
    /// off-CPU intervals": the shown samples `filter` keeps, for subtitles and messages.
    pub fn count_text(self, p: &Profile, filter: &Filter) -> String {
        let sum = |keep: &dyn Fn(&Entry) -> bool, value: &dyn Fn(&Entry) -> u64| -> u64 {
            p.entries.iter().filter(|e| filter.matches(e) && keep(e)).map(value).sum()
        };
        let count = |keep: &dyn Fn(&Entry) -> bool| sum(keep, &|e| e.count);
        match self {
            Kind::Cpu => format!("{} CPU samples", count(&|e| e.kind.is_cpu())),
            Kind::OffCpu => {
                let ns = sum(&|e| e.kind.is_off_cpu(), &|e| e.weight);
                format!("{} off-CPU intervals ({:.1} s)", count(&|e| e.kind.is_off_cpu()), ns as f64 / 1e9)
            }
            Kind::CpuAndOffCpu => format!("{} CPU samples and {} off-CPU intervals", count(&|e| e.kind.is_cpu()), count(&|e| e.kind.is_off_cpu())),
            Kind::Alloc => {
                let bytes = sum(&|e| e.kind.is_alloc(), &|e| e.weight);
                format!("{} allocation samples standing for {:.1} MB", count(&|e| e.kind.is_alloc()), bytes as f64 / 1e6)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thread_ctx_model::SampleKind;

    fn profile() -> Profile {
        let mut p = Profile::default();
        (p.off_cpu_traced, p.alloc_traced) = (true, true);
        let e = |kind, trace: u8, count, weight| Entry { kind, weight, ..Entry::test(vec![], Some((trace, trace)), &[], count) };
        p.push_entry(e(SampleKind::Cpu, 1, 3, 30_000_000));
        p.push_entry(e(SampleKind::Blocked, 1, 2, 2_000_000_000));
        p.push_entry(e(SampleKind::Alloc, 2, 4, 4_000_000));
        p
    }

    #[test]
    fn each_kind_counts_its_own_samples_only() {
        let p = profile();
        let all = Filter::default();
        assert_eq!(Kind::ALL.map(|k| k.count(&p, &all)), [3, 2, 5, 4]);
        assert_eq!(Kind::Alloc.count_text(&p, &all), "4 allocation samples standing for 4.0 MB");
        assert_eq!(Kind::OffCpu.count_text(&p, &all), "2 off-CPU intervals (2.0 s)");
        assert_eq!(Kind::CpuAndOffCpu.count_text(&p, &all), "3 CPU samples and 2 off-CPU intervals");
        let trace2 = Filter::parse(Some(&"02".repeat(16)), None, &[]).unwrap();
        assert_eq!(Kind::Cpu.count_text(&p, &trace2), "0 CPU samples", "the allocations of trace 2 are not CPU samples");
        assert_eq!(Kind::Alloc.title(&trace2), format!("Allocated bytes: trace {}", "02".repeat(16)));
        assert_eq!(Kind::default_for(&p), Kind::CpuAndOffCpu, "allocations are drawn only when asked for");
        assert_eq!(Kind::default_for(&Profile::default()), Kind::Cpu);
    }
}
