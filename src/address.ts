/** Splits `HOST:PORT` (IPv6 hosts in brackets). */
export function splitHostPort(address: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(address);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port > 65535) return undefined;
  const host = m[1].startsWith('[') ? m[1].slice(1, -1) : m[1];
  return { host, port };
}

/** `0.0.0.0`, `::` (bracketed or not) or an empty host: listens everywhere, dials nowhere. */
export function isWildcardHost(host: string): boolean {
  return host === '' || /^0+(\.0+){3}$/.test(host) || /^\[?[0:]+\]?$/.test(host);
}
