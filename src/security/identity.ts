/**
 * Who a downstream client is, for the authorization policy.
 *
 * From its verified certificate (mTLS): the first URI SAN (a SPIFFE id, say),
 * else the first DNS SAN, else the subject CN. A client without a certificate
 * is known by its node id only where the policy says so
 * (`allow-node-id-identity: true`, for plaintext deployments inside a
 * trusted network); otherwise it has no identity.
 */
import type { PeerCertificate } from 'node:tls';

/** What grpc-js server calls offer: `call.getAuthContext()`. */
export interface HasAuthContext {
  getAuthContext(): { sslPeerCertificate?: PeerCertificate };
}

/**
 * Splits Node's `subjectaltname` text (`DNS:a, URI:spiffe://x, IP Address:1.2.3.4`)
 * into entries. Node quotes a value containing a comma, quote or control
 * character as a JSON string (`URI:"spiffe://a,b"`), so a crafted SAN cannot
 * smuggle in a second entry.
 */
export function parseSubjectAltNames(text: string | undefined): { type: string; value: string }[] {
  const out: { type: string; value: string }[] = [];
  if (!text) return out;
  let i = 0;
  while (i < text.length) {
    while (text[i] === ' ') i++;
    const colon = text.indexOf(':', i);
    if (colon < 0) break;
    const type = text.slice(i, colon);
    i = colon + 1;
    let value: string;
    if (text[i] === '"') {
      // A JSON string: find the closing quote that is not escaped.
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      try {
        value = JSON.parse(text.slice(i, j + 1)) as string;
      } catch {
        return out; // malformed: keep what parsed cleanly, trust nothing after it
      }
      i = j + 1;
      if (text.startsWith(', ', i)) i += 2;
    } else {
      const end = text.indexOf(', ', i);
      value = end < 0 ? text.slice(i) : text.slice(i, end);
      i = end < 0 ? text.length : end + 2;
    }
    out.push({ type, value });
  }
  return out;
}

/** The identity a certificate names: URI SAN, then DNS SAN, then subject CN. */
export function certificateIdentity(cert: Pick<PeerCertificate, 'subjectaltname' | 'subject'> | undefined): string | undefined {
  if (!cert) return undefined;
  const sans = parseSubjectAltNames(cert.subjectaltname);
  const uri = sans.find((s) => s.type === 'URI' && s.value !== '');
  if (uri) return uri.value;
  const dns = sans.find((s) => s.type === 'DNS' && s.value !== '');
  if (dns) return dns.value;
  // Node gives a repeated attribute as an array.
  const cn: unknown = cert.subject?.CN;
  const first = Array.isArray(cn) ? cn[0] : cn;
  return typeof first === 'string' && first !== '' ? first : undefined;
}

/**
 * A client's identity: its verified certificate's, else (only when
 * `allowNodeId`) its node id, else undefined. grpc-js reports a peer
 * certificate only once the TLS handshake verified it (with
 * `--tls-client-ca`, an unverified one never gets this far).
 */
export function peerIdentity(call: HasAuthContext, nodeId: string | undefined, allowNodeId: boolean): string | undefined {
  let fromCert: string | undefined;
  try {
    fromCert = certificateIdentity(call.getAuthContext().sslPeerCertificate);
  } catch {
    fromCert = undefined; // a closed connection has no auth context left
  }
  return fromCert ?? nodeIdIdentity(nodeId, allowNodeId);
}

/**
 * A client's identity where no client certificate can be verified (no
 * `--tls-client-ca`): its node id, only when `allowNodeId`. What peerIdentity
 * answers on such a listener, without asking grpc-js for a certificate per
 * stream.
 */
export function nodeIdIdentity(nodeId: string | undefined, allowNodeId: boolean): string | undefined {
  return allowNodeId && nodeId ? nodeId : undefined;
}
