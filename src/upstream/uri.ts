/** A parsed upstream URI: `grpc://host:port` or `file://DIR`. */
export type UpstreamUri = { scheme: 'grpc'; target: string } | { scheme: 'file'; path: string };

export class UpstreamUriError extends Error {}

export function parseUpstreamUri(uri: string): UpstreamUri {
  const m = /^([a-z][a-z0-9+.-]*):\/\/(.*)$/i.exec(uri);
  if (!m) throw new UpstreamUriError(`"${uri}" is not a URI (expected grpc://host:port or file://DIR)`);
  const scheme = m[1].toLowerCase();
  const rest = m[2];
  if (scheme === 'grpc') {
    const hp = /^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):(\d{1,5})\/?$/.exec(rest);
    if (!hp || Number(hp[2]) > 65535) throw new UpstreamUriError(`"${uri}": expected grpc://host:port`);
    return { scheme: 'grpc', target: `${hp[1]}:${hp[2]}` };
  }
  if (scheme === 'file') {
    if (rest === '') throw new UpstreamUriError(`"${uri}": file:// needs a directory`);
    return { scheme: 'file', path: rest };
  }
  throw new UpstreamUriError(`"${uri}": unsupported scheme ${scheme}:// (use grpc:// or file://)`);
}
