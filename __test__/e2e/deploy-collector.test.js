'use strict';
// deploy/kubernetes/collector.yaml: its ConfigMap holds the production configuration
// (collector/node.yaml and collector/storage.yaml, unchanged), which the project's Collector (the
// same components a user's ocb build has: spanprofiles, spanmetrics, OTLP, file_storage) accepts
// as the DaemonSet runs it; the DaemonSet offers the ports the agent's DaemonSet and the pods send
// to, names the backends the configuration needs, and mounts the storage it writes.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const YAML = require('yaml');
const { ROOT, BIN } = require('../../demo/pipeline');
const { needs } = require('../helpers/needs');

const docs = YAML.parseAllDocuments(fs.readFileSync(path.join(ROOT, 'deploy', 'kubernetes', 'collector.yaml'), 'utf8')).map((d) => d.toJS());
const configMap = docs.find((d) => d.kind === 'ConfigMap');
const daemonSet = docs.find((d) => d.kind === 'DaemonSet');
const container = daemonSet.spec.template.spec.containers[0];
const built = fs.existsSync(BIN.collector);

test('the ConfigMap is the production configuration, unchanged', () => {
  for (const file of ['node.yaml', 'storage.yaml']) {
    assert.equal(configMap.data[file], fs.readFileSync(path.join(ROOT, 'collector', file), 'utf8'), `ConfigMap ${file} is collector/${file}`);
  }
});

const collectorNeed = needs(!built && `${BIN.collector} missing: run "bash scripts/setup.sh"`);
test('the Collector accepts the configuration as the DaemonSet runs it', { skip: collectorNeed.skip }, collectorNeed.guard(() => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-collector-'));
  for (const [file, text] of Object.entries(configMap.data)) fs.writeFileSync(path.join(dir, file), text);
  const args = container.args.map((a) => a.replace('/conf/', `${dir}/`));
  const env = Object.fromEntries(container.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));
  const r = spawnSync(BIN.collector, ['validate', ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.status, 0, `otelcol validate: ${r.stdout}${r.stderr}`);
  const config = YAML.parse(configMap.data['node.yaml']);
  const pipelines = config.service.pipelines;
  assert.deepEqual(pipelines['traces/in'].exporters, ['spanprofiles']);
  assert.ok(pipelines.profiles.exporters.includes('spanprofiles'));
  assert.ok(pipelines.traces.receivers.includes('spanprofiles') && pipelines.traces.exporters.includes('span_metrics'));
}));

test('the DaemonSet listens on the node where the agent and the pods send, and keeps its storage on a volume', () => {
  assert.deepEqual(container.ports.filter((p) => p.hostPort).map((p) => [p.containerPort, p.hostPort]), [[4317, 4317], [4318, 4318]]);
  assert.ok(container.args.includes('--feature-gates=+service.profilesSupport'));
  const agent = YAML.parse(fs.readFileSync(path.join(ROOT, 'deploy', 'kubernetes', 'daemonset.yaml'), 'utf8'));
  const endpoint = agent.spec.template.spec.containers[0].env.find((e) => e.name === 'OTEL_EXPORTER_OTLP_ENDPOINT').value;
  assert.equal(endpoint, 'http://$(NODE_IP):4317');
  const storageDir = container.env.find((e) => e.name === 'OTELCOL_STORAGE_DIR').value;
  assert.ok(container.volumeMounts.some((m) => storageDir.startsWith(m.mountPath) && m.mountPath !== '/conf'), `${storageDir} is on a volume`);
  assert.ok(container.ports.some((p) => p.containerPort === 8888), 'the Collector\'s own metrics port');
});
