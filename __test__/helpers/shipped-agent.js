'use strict';
// The agent's flags as the repository ships them, read from the files themselves: the systemd
// service's THREAD_CTX_AGENT_ARGS (deploy/systemd/agent.env), the DaemonSet container's args
// (deploy/kubernetes/daemonset.yaml) and the image's CMD (deploy/Dockerfile), each without the
// leading `agent`. Tests that claim something of "the shipped defaults" run the agent with these.
const fs = require('node:fs');
const path = require('node:path');
const YAML = require('yaml');

const DEPLOY = path.join(__dirname, '..', '..', 'deploy');

/** KEY=value lines of an environment file. */
function envFile(text) {
  return Object.fromEntries(text.split('\n').filter((l) => /^[A-Z_]+=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

/** { systemd, daemonset, image }: each place's agent flags, as an argv without `agent`. */
function shippedAgentArgs() {
  const env = envFile(fs.readFileSync(path.join(DEPLOY, 'systemd', 'agent.env'), 'utf8'));
  const systemd = (env.THREAD_CTX_AGENT_ARGS ?? '').split(/\s+/).filter(Boolean);
  const ds = YAML.parse(fs.readFileSync(path.join(DEPLOY, 'kubernetes', 'daemonset.yaml'), 'utf8'));
  const [daemonsetCmd, ...daemonset] = ds.spec.template.spec.containers[0].args;
  const cmdLine = fs.readFileSync(path.join(DEPLOY, 'Dockerfile'), 'utf8').split('\n').find((l) => l.startsWith('CMD '));
  const [imageCmd, ...image] = JSON.parse(cmdLine.slice('CMD '.length));
  for (const [where, cmd] of [['daemonset.yaml', daemonsetCmd], ['Dockerfile', imageCmd]]) {
    if (cmd !== 'agent') throw new Error(`deploy/${where}: expected the agent's arguments to start with "agent", got ${JSON.stringify(cmd)}`);
  }
  return { systemd, daemonset, image };
}

/** The value of `--flag VALUE` in `args`, or undefined. */
function flagValue(args, flag) {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

module.exports = { envFile, shippedAgentArgs, flagValue };
