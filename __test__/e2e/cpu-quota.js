'use strict';
// A cgroup with a CPU quota for the end-to-end tests, in whichever hierarchy has the `cpu`
// controller here: cgroup v2 (`cpu.max`) or v1's `cpu` hierarchy (`cpu.cfs_quota_us`). Needs root.
const fs = require('node:fs');
const path = require('node:path');

/** Where the `cpu` controller is mounted: { version: 1 | 2, root } or null. */
function cpuHierarchy(mountinfo = fs.readFileSync('/proc/self/mountinfo', 'utf8')) {
  for (const line of mountinfo.split('\n')) {
    const [pre, post] = line.split(' - ');
    if (!post) continue;
    const mountPoint = pre.split(' ')[4];
    const [fsType, , options = ''] = post.split(' ');
    if (fsType === 'cgroup2') {
      const controllers = fs.readFileSync(path.join(mountPoint, 'cgroup.controllers'), 'utf8').split(/\s+/);
      if (controllers.includes('cpu')) return { version: 2, root: mountPoint };
    } else if (fsType === 'cgroup' && options.split(',').includes('cpu')) {
      return { version: 1, root: mountPoint };
    }
  }
  return null;
}

/**
 * Makes cgroup `name` with a quota of `cpus` CPUs (0.5: half of one) per 100 ms period.
 * Returns { version, dir, add(pid), remove() }; add moves a whole process into it, remove
 * moves what is left back to the parent and deletes it.
 */
function cpuQuota(name, cpus) {
  const h = cpuHierarchy();
  if (!h) throw new Error('no cgroup hierarchy here has the cpu controller (cgroup v1 or v2)');
  const dir = path.join(h.root, name);
  const periodUs = 100_000;
  const quotaUs = Math.round(cpus * periodUs);
  if (h.version === 2) {
    // The controller must be on for the root's children.
    fs.writeFileSync(path.join(h.root, 'cgroup.subtree_control'), '+cpu');
  }
  fs.mkdirSync(dir, { recursive: true });
  if (h.version === 2) fs.writeFileSync(path.join(dir, 'cpu.max'), `${quotaUs} ${periodUs}`);
  else {
    fs.writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(periodUs));
    fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
  }
  const set = (c) => {
    const quota = Math.round(c * periodUs);
    if (h.version === 2) fs.writeFileSync(path.join(dir, 'cpu.max'), `${quota} ${periodUs}`);
    else fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quota));
  };
  return {
    version: h.version,
    dir,
    add: (pid) => fs.writeFileSync(path.join(dir, 'cgroup.procs'), String(pid)),
    /** A new quota, in CPUs. */
    set,
    /** The quota periods it was throttled in so far (cpu.stat `nr_throttled`). */
    throttled: () => Number(/^nr_throttled (\d+)$/m.exec(fs.readFileSync(path.join(dir, 'cpu.stat'), 'utf8'))?.[1] ?? 0),
    remove: () => {
      for (const pid of fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
        try {
          fs.writeFileSync(path.join(h.root, 'cgroup.procs'), pid);
        } catch {
          // Gone meanwhile.
        }
      }
      fs.rmdirSync(dir);
    },
  };
}

module.exports = { cpuHierarchy, cpuQuota };
