import type { Logger } from '../log';
import { parseUpstreamUri } from '../upstream-uri';
import { insecureChannel, UpstreamTls, type ChannelSetup, type UpstreamTlsSpec } from '../security/tls';

/**
 * How to reach each server of one authority: `grpcs://` targets over TLS with
 * the authority's settings (files re-read per connection attempt),
 * `grpc://` targets in plaintext. Throws if the TLS files are unusable at start.
 */
export function upstreamChannels(uris: readonly string[], tls: UpstreamTlsSpec | undefined, logger: Logger): (target: string) => ChannelSetup {
  const secureTargets = new Set<string>();
  for (const uri of uris) {
    const parsed = parseUpstreamUri(uri);
    if (parsed.scheme === 'grpcs') secureTargets.add(parsed.target);
  }
  if (secureTargets.size === 0) return insecureChannel;
  const secure = new UpstreamTls(tls ?? {}, logger.child({ component: 'upstream-tls' }));
  return (target) => (secureTargets.has(target) ? secure.channel() : insecureChannel());
}
