/** Splits `HOST:PORT` (IPv6 hosts in brackets). */
export function splitHostPort(address: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(address);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port > 65535) return undefined;
  const host = m[1].startsWith('[') ? m[1].slice(1, -1) : m[1];
  return { host, port };
}
