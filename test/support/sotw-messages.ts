/**
 * State-of-the-world ADS messages (DiscoveryRequest / DiscoveryResponse) for
 * the test-only SotW server and client: the relay's own codecs
 * (src/proto/messages.ts) and the method with raw-bytes (de)serializers.
 */
import * as grpc from '@grpc/grpc-js';
import { sotwAdsMethod } from '../../src/proto/ads-service';

export type { DiscoveryRequest, DiscoveryResponse } from '../../src/proto/messages';
export { discoveryRequestCodec as sotwRequestCodec, discoveryResponseCodec as sotwResponseCodec } from '../../src/proto/messages';

/** StreamAggregatedResources with raw-bytes (de)serializers. */
export const sotwAdsServiceDefinition: grpc.ServiceDefinition = {
  StreamAggregatedResources: sotwAdsMethod,
};
