#!/usr/bin/env node
// Validates objects of the CRD kinds the manifests and the Helm chart ship against the CRDs' own
// schemas: cert-manager.io/v1 (as packaged by @kubernetes-models/cert-manager) and the
// Prometheus Operator's monitoring.coreos.com/v1 (@kubernetes-models/prometheus-operator): types,
// enums, patterns and required fields. (Like the API server, these schemas do not refuse
// unknown fields: a CRD prunes them.)
// Usage: node validate-crds.js OBJECTS.json   (a JSON array of objects)
// Exits 1 naming every object that fails or whose kind is not one this check knows.
"use strict";
const fs = require("fs");

async function main() {
  const cm = "@kubernetes-models/cert-manager/cert-manager.io/v1";
  // The Prometheus Operator's models are ES modules only.
  const monitoring = await import("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1");
  const models = {
    "cert-manager.io/v1": {
      Certificate: require(`${cm}/Certificate`).Certificate,
      Issuer: require(`${cm}/Issuer`).Issuer,
      ClusterIssuer: require(`${cm}/ClusterIssuer`).ClusterIssuer,
    },
    "monitoring.coreos.com/v1": {
      ServiceMonitor: monitoring.ServiceMonitor,
      PodMonitor: monitoring.PodMonitor,
    },
  };

  const objects = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  let failed = 0;
  for (const obj of objects) {
    const name = `${obj.kind}/${obj.metadata && obj.metadata.name}`;
    const Model = (models[obj.apiVersion] || {})[obj.kind];
    if (!Model) {
      console.log(`FAIL ${name}: not a kind this check knows (${obj.apiVersion})`);
      failed++;
      continue;
    }
    try {
      new Model(obj).validate();
      console.log(`ok   ${name}`);
    } catch (err) {
      console.log(`FAIL ${name}: ${err.message}`);
      failed++;
    }
  }
  process.exit(failed === 0 && objects.length > 0 ? 0 : 1);
}

main().catch((err) => {
  console.log(`FAIL: ${err.stack || err}`);
  process.exit(1);
});
