'use strict';
// deploy/kubernetes/collector.yaml: its ConfigMap holds the production configuration
// (collector/node.yaml and collector/storage.yaml, unchanged), which the project's Collector (the
// same components a user's ocb build has: span_profiles, spanmetrics, OTLP, file_storage) accepts
// as the DaemonSet runs it; the DaemonSet offers the ports the agent's DaemonSet and the pods send
// to, names the backends the configuration needs, and mounts the storage it writes. The same for
// deploy/kubernetes/tier.yaml, the trace tier.
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
  assert.deepEqual(pipelines['traces/in'].exporters, ['span_profiles']);
  assert.ok(pipelines.profiles.exporters.includes('span_profiles'));
  assert.ok(pipelines.traces.receivers.includes('span_profiles') && pipelines.traces.exporters.includes('span_metrics'));
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

// Nothing listens on a wildcard address: on a host the defaults are loopback; in the DaemonSet
// the pod's own address; health_check answers the probes there (collector-auth.test.js starts it).
test('the Collector listens on no wildcard address, and the probes ask health_check', () => {
  const listening = /\$\{env:(OTELCOL_(?:GRPC|HTTP|HEALTH|AGENT)_ENDPOINT|OTELCOL_TELEMETRY_HOST):-([^}]*)\}/g;
  for (const file of ['node.yaml', 'storage.yaml', 'auth.yaml', 'tier.yaml', 'to-tier.yaml']) {
    const text = fs.readFileSync(path.join(ROOT, 'collector', file), 'utf8');
    const config = text.split('\n').filter((l) => !l.trim().startsWith('#')).join('\n');
    assert.doesNotMatch(config, /0\.0\.0\.0|\[::\]|host:\s*["']?::/, `${file} names a wildcard address`);
    for (const [, name, fallback] of config.matchAll(listening)) assert.match(fallback, /^127\.0\.0\.1(:\d+)?$/, `${file}: ${name} defaults to ${fallback}`);
  }
  const node = YAML.parse(fs.readFileSync(path.join(ROOT, 'collector', 'node.yaml'), 'utf8'));
  assert.deepEqual(node.service.extensions, ['health_check']);
  const env = Object.fromEntries(container.env.map((e) => [e.name, e.value ?? e.valueFrom]));
  assert.deepEqual(env.MY_POD_IP, { fieldRef: { fieldPath: 'status.podIP' } });
  for (const name of ['OTELCOL_GRPC_ENDPOINT', 'OTELCOL_HTTP_ENDPOINT', 'OTELCOL_HEALTH_ENDPOINT', 'OTELCOL_TELEMETRY_HOST']) {
    assert.match(env[name], /^\$\(MY_POD_IP\)/, `${name} is the pod's address`);
  }
  const health = container.ports.find((p) => p.name === 'health');
  assert.equal(health.containerPort, 13133);
  assert.equal(health.hostPort, undefined, 'health_check is not on the node\'s address');
  for (const probe of [container.livenessProbe, container.readinessProbe]) assert.deepEqual(probe.httpGet, { path: '/', port: 'health' });
});

// deploy/kubernetes/tier.yaml: the trace tier's ConfigMap is collector/tier.yaml unchanged, which
// the Collector accepts as the Deployment runs it; its headless Service leads to the port the
// nodes' load_balancing exporter sends to (TIER_PORT, 4317), and it listens on the pod's address.
const tierDocs = YAML.parseAllDocuments(fs.readFileSync(path.join(ROOT, 'deploy', 'kubernetes', 'tier.yaml'), 'utf8')).map((d) => d.toJS());
const tierMap = tierDocs.find((d) => d.kind === 'ConfigMap');
const tierService = tierDocs.find((d) => d.kind === 'Service');
const tierContainer = tierDocs.find((d) => d.kind === 'Deployment').spec.template.spec.containers[0];

test('the trace tier: its ConfigMap is collector/tier.yaml, the Collector accepts it as the Deployment runs it', { skip: collectorNeed.skip }, collectorNeed.guard(() => {
  assert.equal(tierMap.data['tier.yaml'], fs.readFileSync(path.join(ROOT, 'collector', 'tier.yaml'), 'utf8'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-tier-'));
  fs.writeFileSync(path.join(dir, 'tier.yaml'), tierMap.data['tier.yaml']);
  const args = tierContainer.args.map((a) => a.replace('/conf/', `${dir}/`));
  const env = Object.fromEntries(tierContainer.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));
  const r = spawnSync(BIN.collector, ['validate', ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.status, 0, `otelcol validate: ${r.stdout}${r.stderr}`);
}));

test('the trace tier: a headless Service to the port the nodes send to; the pod\'s own address, probes on health_check', () => {
  assert.equal(tierService.spec.clusterIP, 'None', 'headless: the DNS resolver needs every pod\'s address');
  const toTier = YAML.parse(fs.readFileSync(path.join(ROOT, 'collector', 'to-tier.yaml'), 'utf8'));
  assert.equal(toTier.exporters.load_balancing.resolver.dns.port, '${env:TIER_PORT:-4317}');
  assert.deepEqual(tierService.spec.ports.map((p) => p.port), [4317]);
  assert.deepEqual(tierContainer.ports.find((p) => p.name === tierService.spec.ports[0].targetPort).containerPort, 4317);
  assert.deepEqual(tierService.spec.selector, tierDocs.find((d) => d.kind === 'Deployment').spec.template.metadata.labels);
  const env = Object.fromEntries(tierContainer.env.map((e) => [e.name, e.value ?? e.valueFrom]));
  for (const name of ['OTELCOL_GRPC_ENDPOINT', 'OTELCOL_HEALTH_ENDPOINT', 'OTELCOL_TELEMETRY_HOST']) {
    assert.match(env[name], /^\$\(MY_POD_IP\)/, `${name} is the pod's address`);
  }
  for (const probe of [tierContainer.livenessProbe, tierContainer.readinessProbe]) assert.deepEqual(probe.httpGet, { path: '/', port: 'health' });
});
