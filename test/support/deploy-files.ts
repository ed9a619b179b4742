/**
 * Reading what deploy/ ships: the Grafana dashboard's queries and the
 * Prometheus alert rules, and the relay series they use; and what a container
 * runtime would hand the relay's process (args, env, mounted files).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import YAML from 'yaml';

/** dist/test/support/deploy-files.js → deploy/ */
export const DEPLOY_DIR = path.resolve(__dirname, '..', '..', '..', 'deploy');

/** Series the relay exports (its own, and the standard process_* and nodejs_* ones) inside a PromQL expression. */
export const METRIC_TOKEN = /\b(?:xdstp_relay|process|nodejs)_[a-zA-Z0-9_]+/g;

/** Every query of the dashboard (panel targets and template variables). */
export function dashboardExprs(): string[] {
  const dash = JSON.parse(fs.readFileSync(path.join(DEPLOY_DIR, 'grafana', 'dashboards', 'xdstp-relay.json'), 'utf8')) as Record<string, unknown>;
  const exprs: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if ((k === 'expr' || k === 'query' || k === 'definition') && typeof x === 'string') exprs.push(x);
        else walk(x);
      }
    }
  };
  walk(dash.panels);
  walk(dash.templating);
  return exprs;
}

export interface AlertRule {
  alert: string;
  expr: string;
}

/** The alerting rules of deploy/prometheus/alerts.yaml. */
export function alertRules(): AlertRule[] {
  const doc = YAML.parse(fs.readFileSync(path.join(DEPLOY_DIR, 'prometheus', 'alerts.yaml'), 'utf8')) as {
    groups: Array<{ rules: Array<{ alert?: string; expr: string }> }>;
  };
  return doc.groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined).map((r) => ({ alert: r.alert!, expr: String(r.expr) }));
}

/** Relay series names used by the dashboard and the alert rules. */
export function seriesUsedByDeploy(): string[] {
  const exprs = [...dashboardExprs(), ...alertRules().map((r) => r.expr)];
  return [...new Set(exprs.flatMap((e) => e.match(METRIC_TOKEN) ?? []))].sort();
}

// ------------------------------------------------- what a container is handed

/**
 * What a container runtime hands the relay's process: its arguments, its
 * environment, and files at paths inside the container. Rendered from the
 * manifests, then `materialize`d on this machine.
 */
export interface ContainerView {
  args: string[];
  env: Record<string, string>;
  /** Absolute path in the container → contents and mode. */
  files: Map<string, { text: string; mode: number }>;
}

/** A Service as far as service links are concerned. */
export interface ServiceForLinks {
  name: string;
  clusterIP: string;
  ports: Array<{ name?: string; port: number; protocol?: string }>;
}

/**
 * The variables the kubelet injects into every pod for a Service (docker-link
 * style "service links", on unless the pod sets `enableServiceLinks: false`):
 * NAME_SERVICE_HOST, NAME_SERVICE_PORT[_PORTNAME], NAME_PORT and, per port,
 * NAME_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]; NAME upper-cased, dashes to
 * underscores.
 */
export function serviceLinkEnv(services: readonly ServiceForLinks[]): Record<string, string> {
  const env: Record<string, string> = {};
  const up = (s: string): string => s.toUpperCase().replace(/-/g, '_');
  for (const s of services) {
    const n = up(s.name);
    const first = s.ports[0];
    if (!first) continue;
    env[`${n}_SERVICE_HOST`] = s.clusterIP;
    env[`${n}_SERVICE_PORT`] = String(first.port);
    for (const p of s.ports) if (p.name) env[`${n}_SERVICE_PORT_${up(p.name)}`] = String(p.port);
    env[`${n}_PORT`] = `${(first.protocol ?? 'TCP').toLowerCase()}://${s.clusterIP}:${first.port}`;
    for (const p of s.ports) {
      const proto = p.protocol ?? 'TCP';
      const base = `${n}_PORT_${p.port}_${proto.toUpperCase()}`;
      env[base] = `${proto.toLowerCase()}://${s.clusterIP}:${p.port}`;
      env[`${base}_PROTO`] = proto.toLowerCase();
      env[`${base}_PORT`] = String(p.port);
      env[`${base}_ADDR`] = s.clusterIP;
    }
  }
  return env;
}

/**
 * Puts a container's view on this machine: files under `root` at their
 * container paths, and every container path in args, env and file contents
 * rewritten to match; `network` maps addresses the container would reach
 * (`host:port`, by plain string replacement) to local ones.
 */
export function materialize(
  view: ContainerView,
  root: string,
  network: ReadonlyMap<string, string> = new Map(),
): { args: string[]; env: Record<string, string>; rewrite: (s: string) => string } {
  const dirs = [...new Set([...view.files.keys()].map((f) => path.posix.dirname(f)))].sort((a, b) => b.length - a.length);
  const replacements = new Map<string, string>(network);
  for (const d of dirs) replacements.set(`${d}/`, `${path.join(root, d)}/`);
  const escape = (x: string): string => x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // One pass, longest match first, so a rewritten path is never rewritten again.
  const pattern = new RegExp([...replacements.keys()].sort((a, b) => b.length - a.length).map(escape).join('|'), 'g');
  const rewrite = (s: string): string => (replacements.size === 0 ? s : s.replace(pattern, (m) => replacements.get(m)!));
  for (const [file, { text, mode }] of view.files) {
    const local = path.join(root, file);
    fs.mkdirSync(path.dirname(local), { recursive: true });
    fs.writeFileSync(local, rewrite(text));
    fs.chmodSync(local, mode);
  }
  return { args: view.args.map(rewrite), env: Object.fromEntries(Object.entries(view.env).map(([k, v]) => [k, rewrite(v)])), rewrite };
}
