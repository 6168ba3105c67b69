"""Points every webhook of the MutatingWebhookConfiguration at https://127.0.0.1:PORT, each at
the path of its Service (/mutate, or /mutate/opted-in)."""
import sys

import yaml

port = int(sys.argv[1])
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
for doc in docs:
    if doc.get("kind") == "MutatingWebhookConfiguration":
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            config = {"url": f"https://127.0.0.1:{port}{path}"}
            if "caBundle" in hook["clientConfig"]:
                config["caBundle"] = hook["clientConfig"]["caBundle"]
            hook["clientConfig"] = config
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
