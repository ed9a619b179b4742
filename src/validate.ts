/**
 * `xdstp-relay validate --config FILE` (or `--validate`): check a
 * configuration the way the relay would load it, print every problem with its
 * path, exit 0 when there is none.
 */
import type { ConfigError, RelayConfig } from './config';

/** A problem as printed: where (option / config-file key) and what. */
export interface ValidationProblem {
  path: string;
  message: string;
}

/** `validate` as the first word, or `--validate` anywhere (before a `--`). */
export function isValidateInvocation(argv: readonly string[]): boolean {
  if (argv[0] === 'validate') return true;
  for (const a of argv) {
    if (a === '--') break;
    if (a === '--validate' || a === '--validate=true') return true;
  }
  return false;
}

/** argv without the `validate` word, for the ordinary option parser. */
export function stripValidateWord(argv: readonly string[]): string[] {
  return argv[0] === 'validate' ? argv.slice(1) : [...argv];
}

/** The problems in an option-parser (yargs) error message: one per unknown key. */
export function problemsOfParseError(message: string, configPath: string | undefined): ValidationProblem[] {
  const firstLine = message.split('\n')[0] ?? message;
  const unknown = /^Unknown arguments?: (.+)$/.exec(firstLine);
  if (unknown) {
    const keys = unknown[1].split(/,\s*/);
    // The parser names a dashed key twice (`service-host, serviceHost`): keep the spelling that was given.
    const camel = (k: string): string => k.replace(/-([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
    const given = keys.filter((k) => !keys.some((o) => o !== k && camel(o) === k));
    return given.map((key) => ({ path: key, message: 'unknown option (not a flag nor a config-file key)' }));
  }
  return [{ path: configPath ?? '(arguments)', message: firstLine }];
}

export function problemsOfConfigErrors(errors: readonly ConfigError[]): ValidationProblem[] {
  return errors.map((e) => ({ path: e.path, message: e.message.startsWith(`${e.path}: `) ? e.message.slice(e.path.length + 2) : e.message }));
}

/**
 * De-duplicates and prints the outcome on stdout; returns the exit code: 0
 * valid, 2 (what start exits with) when there are problems. The caller then
 * writes start's one-line JSON error to stderr.
 */
export function reportValidation(
  out: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream },
  source: string,
  problems: readonly ValidationProblem[],
  config: RelayConfig | undefined,
): number {
  const seen = new Set<string>();
  const unique = problems.filter((p) => {
    const k = `${p.path}\n${p.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  if (unique.length === 0 && config) {
    const upstreams = config.authorities.map((a) => a.name).concat(config.defaultUpstream ? ['(default)'] : []);
    const sec = config.security;
    const tls = !sec?.tls ? 'plaintext' : sec.tls.clientCaFile ? 'mTLS' : 'TLS';
    out.stdout.write(
      `xdstp-relay: ${source}: valid (listen ${config.listen} ${tls}, admin ${config.admin ?? 'off'}${sec?.adminTokenFile ? ' with token' : ''}, ` +
        `upstreams: ${upstreams.join(', ') || 'none'}, policy: ${sec?.policyFile ?? 'none'})\n`,
    );
    return 0;
  }
  out.stdout.write(`xdstp-relay: ${source}: ${unique.length} problem${unique.length === 1 ? '' : 's'}\n`);
  for (const p of unique) out.stdout.write(`  ${p.path}: ${p.message}\n`);
  return 2;
}
