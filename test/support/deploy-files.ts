/**
 * Reading what deploy/ ships: the Grafana dashboard's queries and the
 * Prometheus alert rules, and the relay series they use.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import YAML from 'yaml';

/** dist/test/support/deploy-files.js → deploy/ */
export const DEPLOY_DIR = path.resolve(__dirname, '..', '..', '..', 'deploy');

/** Relay series names inside a PromQL expression. */
export const METRIC_TOKEN = /\bxdstp_relay_[a-zA-Z0-9_]+/g;

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
