'use strict';
// deploy/kubernetes/collector.yaml: its Collector configuration is one the project's Collector
// (the same components a user's ocb build has: spanprofiles, spanmetrics, OTLP) accepts, and
// its DaemonSet offers the ports the agent's DaemonSet and the pods send to.
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

const collectorNeed = needs(!fs.existsSync(BIN.collector) && `${BIN.collector} missing: run "bash scripts/setup.sh"`);
test('the Collector configuration of the deploy example is valid for a Collector with spanprofiles', { skip: collectorNeed.skip }, collectorNeed.guard(() => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-collector-'));
  const file = path.join(dir, 'config.yaml');
  fs.writeFileSync(file, configMap.data['config.yaml']);
  const r = spawnSync(BIN.collector, ['validate', `--config=${file}`, '--feature-gates=+service.profilesSupport'], { encoding: 'utf8' });
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.status, 0, `otelcol validate: ${r.stdout}${r.stderr}`);
  const config = YAML.parse(configMap.data['config.yaml']);
  const pipelines = config.service.pipelines;
  assert.deepEqual(pipelines['traces/in'].exporters, ['spanprofiles']);
  assert.ok(pipelines.profiles.exporters.includes('spanprofiles'));
  assert.ok(pipelines.traces.receivers.includes('spanprofiles') && pipelines.traces.exporters.includes('span_metrics'));
}));

test('the DaemonSet listens on the node where the agent and the pods send', () => {
  const c = daemonSet.spec.template.spec.containers[0];
  assert.deepEqual(c.ports.map((p) => [p.containerPort, p.hostPort]), [[4317, 4317], [4318, 4318]]);
  assert.ok(c.args.includes('--feature-gates=+service.profilesSupport'));
  const agent = YAML.parse(fs.readFileSync(path.join(ROOT, 'deploy', 'kubernetes', 'daemonset.yaml'), 'utf8'));
  const endpoint = agent.spec.template.spec.containers[0].env.find((e) => e.name === 'OTEL_EXPORTER_OTLP_ENDPOINT').value;
  assert.equal(endpoint, 'http://$(NODE_IP):4317');
});
