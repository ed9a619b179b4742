// The Envoy type registry and its proto3-JSON codec live in
// src/typed-json/envoy-types.ts, off the hot-path encoders; this re-export
// keeps admin/payload.ts's import working until it imports from there.
export { envoyTypes } from '../typed-json/envoy-types';
