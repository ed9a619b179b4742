import { lenField, stringField, varintField } from './wire';

/** A resource the control plane could not serve (xDS `ResourceError`), as clients receive it. */
export interface ResourceErrorInfo {
  name: string;
  /** google.rpc.Code */
  code: number;
  message: string;
}

/**
 * Encodes `ResourceError { ResourceName resource_name = 1; google.rpc.Status error_detail = 2; }`;
 * the same bytes go into a delta response (field 9) and a SotW response (field 7).
 */
export function encodeResourceError(e: ResourceErrorInfo): Buffer {
  const status: Buffer[] = [];
  if (e.code !== 0) status.push(varintField(1, e.code));
  if (e.message !== '') status.push(stringField(2, e.message));
  return Buffer.concat([lenField(1, stringField(1, e.name)), lenField(2, Buffer.concat(status))]);
}
