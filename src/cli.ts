#!/usr/bin/env node
// Placeholder entry point until the relay lands.
console.log('xdstp-relay: not implemented yet');
