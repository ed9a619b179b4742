/**
 * Opening a channel to one server of an upstream: the delta-ADS client with
 * the relay's keepalive and message-size settings over the target's
 * credentials, and the wait until the channel is READY (or fails, or times
 * out) before a stream is opened on it.
 */
import * as grpc from '@grpc/grpc-js';
import { DeltaAdsClient } from '../proto/ads-service';
import type { ChannelSetup } from '../security/tls';

/** A client for `target`; its channel connects lazily (see awaitReady). */
export function openClient(target: string, channel: ChannelSetup): grpc.Client {
  return new DeltaAdsClient(target, channel.credentials, {
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    'grpc.initial_reconnect_backoff_ms': 200,
    ...channel.options,
  });
}

/** Resolves once the channel is READY; rejects on failure or after `timeoutMs`. */
export function awaitReady(client: grpc.Client, timeoutMs: number): Promise<void> {
  const channel = client.getChannel();
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const check = (): void => {
      const state = channel.getConnectivityState(true);
      if (state === grpc.connectivityState.READY) return resolve();
      if (state === grpc.connectivityState.TRANSIENT_FAILURE || state === grpc.connectivityState.SHUTDOWN) {
        return reject(new Error(`connection failed (${grpc.connectivityState[state]})`));
      }
      channel.watchConnectivityState(state, deadline, (err) => (err ? reject(new Error('connect timed out')) : check()));
    };
    check();
  });
}
