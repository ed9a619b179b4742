/**
 * The bundled example mesh: what `npm start` serves when it is given no
 * upstream at all (no --authority, no --default-upstream, no --config), so a
 * fresh checkout runs something useful with no control plane and no Redis.
 */
import * as path from 'node:path';
import { isWildcardHost } from './address';

export const EXAMPLES_AUTHORITY = 'examples.local';

/** The example glob a client can subscribe to first. */
export const EXAMPLES_GLOB = `xdstp://${EXAMPLES_AUTHORITY}/envoy.config.listener.v3.Listener/mesh/*?node_type=ingress`;

/** `examples/mesh` of the repository (this file runs as dist/src/examples.js). */
export function examplesDir(): string {
  return path.resolve(__dirname, '..', '..', 'examples', 'mesh');
}

/** The `--authority` value that serves the examples. */
export function examplesAuthority(): string {
  return `${EXAMPLES_AUTHORITY}=file://${examplesDir()}`;
}

/** The debug-client command that shows the example resources on a relay listening at `listen`. */
export function examplesHint(listen: string, port: number): string {
  const host = listen.slice(0, listen.lastIndexOf(':'));
  const reachable = isWildcardHost(host) ? '127.0.0.1' : host;
  return `npm run xds -- subscribe '${EXAMPLES_GLOB}' --server ${reachable}:${port}`;
}
