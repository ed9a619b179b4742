#!/bin/sh
# Throwaway certificates for the local compose fleet — never for production:
# a CA, the relays' serving certificate, a client certificate for local tools
# (`npm run xds --ca … --cert … --key …`), and a random admin token. Written
# once into DIR (default /certs) and kept across restarts; delete the volume
# (docker compose down -v) for new ones.
#
#   sh deploy/certs/generate.sh DIR [OWNER_UID]
set -eu
out="${1:-/certs}"
owner="${2:-}"
mkdir -p "$out"
if [ -s "$out/ca.crt" ] && [ -s "$out/admin-token" ]; then
  echo "certs: $out already has certificates"
  exit 0
fi
if ! command -v openssl >/dev/null 2>&1; then
  apk add --no-cache openssl >/dev/null
fi
cd "$out"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"

# shellcheck disable=SC2086
openssl req -x509 $ec -keyout ca.key -out ca.crt -days 365 -subj /CN=xdstp-relay-compose-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null

# issue NAME SAN…: a leaf certificate signed by the CA.
issue() {
  name="$1"
  san="$2"
  # shellcheck disable=SC2086
  openssl req -new $ec -keyout "$name.key" -out "$name.csr" -subj "/CN=$name" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$san" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name.crt" -days 365 -extfile "$name.ext" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
issue relay "DNS:relay-1,DNS:relay-2,DNS:localhost,IP:127.0.0.1"
issue client "URI:spiffe://xdstp-relay.local/local-client"
rm -f ca.key ca.srl
openssl rand -hex 32 > admin-token
chmod 0640 ./*.key admin-token
chmod 0644 ./*.crt
if [ -n "$owner" ]; then chown -R "$owner:$owner" "$out"; fi
echo "certs: wrote ca.crt, relay.crt/.key, client.crt/.key and admin-token to $out"
