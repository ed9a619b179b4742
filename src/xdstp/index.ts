export { XdstpNameError, type XdstpErrorCode } from './errors';
export type { XdstpName } from './types';
export { isXdstpName, parseUrl, parseUrn } from './parse';
export { formatName, type FormatOptions } from './format';
export { canonicalUrl, canonicalUrn } from './canonical';
export { globKeyOf, matchesGlob } from './glob';
export { isListCollectionType, typeUrlOf } from './resource-type';
