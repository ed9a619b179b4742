/**
 * The command-line tools' side of TLS (`--ca/--cert/--key/--server-name`):
 * a channel to a relay that serves TLS, presenting a client certificate for
 * mTLS. Plaintext when none of them is given.
 */
import * as fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';

/** `--ca/--cert/--key/--server-name`: TLS (and mTLS) to a relay that serves it. */
export interface ClientTls {
  ca?: string;
  cert?: string;
  key?: string;
  serverName?: string;
}

export function clientChannel(tls: ClientTls): { credentials: grpc.ChannelCredentials; options: grpc.ChannelOptions } {
  if (!tls.ca && !tls.cert && !tls.key) return { credentials: grpc.credentials.createInsecure(), options: {} };
  if (!tls.cert !== !tls.key) throw new Error('--cert and --key go together');
  const read = (f: string | undefined): Buffer | null => (f ? fs.readFileSync(f) : null);
  const options: grpc.ChannelOptions = tls.serverName ? { 'grpc.ssl_target_name_override': tls.serverName, 'grpc.default_authority': tls.serverName } : {};
  return { credentials: grpc.credentials.createSsl(read(tls.ca), read(tls.key), read(tls.cert)), options };
}
