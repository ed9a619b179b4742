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

/** Loads .proto files from protos/ (google/protobuf/* from protobufjs' bundled well-known types). */
export function loadProtoRoot(entryFiles: readonly string[]): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    // google/protobuf/* are protobufjs' bundled well-known types; everything else is ours.
    if (target.startsWith('google/protobuf/')) return target;
    return path.join(PROTO_DIR, target);
  };
  root.loadSync([...entryFiles], { keepCase: true });
  root.resolveAll();
  return root;
}

let cached: protobuf.Root | undefined;

/** The protobufjs root holding every transport message; loaded once, on first use. */
export function transportRoot(): protobuf.Root {
  return (cached ??= loadProtoRoot(ENTRY_FILES));
}

export function transportType(fullName: string): protobuf.Type {
  return transportRoot().lookupType(fullName);
}

let cachedStatus: protobuf.Root | undefined;

/** The CSDS messages and service (envoy.service.status.v3); loaded on the first CSDS call. */
export function statusRoot(): protobuf.Root {
  return (cachedStatus ??= loadProtoRoot(['envoy/service/status/v3/csds.proto']));
}
