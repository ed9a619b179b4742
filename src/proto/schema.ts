import * as path from 'node:path';
import * as protobuf from 'protobufjs';

/** Where our own transport .proto files live (repo-relative, also inside dist/). */
export const PROTO_DIR = path.resolve(__dirname, '..', '..', '..', 'protos');

const ENTRY_FILES = [
  'envoy/service/discovery/v3/ads.proto',
  'xds/core/v3/resource_name.proto',
  'xds/core/v3/resource_locator.proto',
  'xds/core/v3/collection_entry.proto',
  'xds/core/v3/authority.proto',
];

let cached: protobuf.Root | undefined;

/** The protobufjs root holding every transport message; loaded once, on first use. */
export function transportRoot(): protobuf.Root {
  if (cached) return cached;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    // google/protobuf/* are protobufjs' bundled well-known types; everything else is ours.
    if (target.startsWith('google/protobuf/')) return target;
    return path.join(PROTO_DIR, target);
  };
  root.loadSync(ENTRY_FILES, { keepCase: true });
  root.resolveAll();
  cached = root;
  return root;
}

export function transportType(fullName: string): protobuf.Type {
  return transportRoot().lookupType(fullName);
}
