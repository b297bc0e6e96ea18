"""Asks the inference Service of examples/eks/inference.yaml twice a second, forever, and says
how it went: after each request its time and the running count ("ok=N failed=M"), each
failed request's error, and which replica gave every 20th answer, so that `kubectl logs` shows
whether the Service kept answering through a node's replacement.

    python3 ask.py [URL]     (default http://llama-serve/predict?seed=1)
"""

import datetime
import json
import sys
import time
import urllib.request


def now():
    return datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]


def main():
    url = sys.argv[1] if len(sys.argv) > 1 else "http://llama-serve/predict?seed=1"
    ok = failed = 0
    while True:
        try:
            r = json.load(urllib.request.urlopen(url, timeout=5))
            ok += 1
            if ok % 20 == 1:
                print(f"{now()} answer {ok} from {r['served_by']}, model of checkpoint step {r['checkpoint_step']}", flush=True)
        except Exception as e:  # every failure is the news here
            failed += 1
            print(f"{now()} no answer: {e}", flush=True)
        print(f"{now()} ok={ok} failed={failed}", flush=True)
        time.sleep(0.5)


if __name__ == "__main__":
    main()
