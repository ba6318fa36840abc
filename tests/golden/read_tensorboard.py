"""Independent reader for KernelRL's TensorBoard event files: TensorBoard's own loader.
Prints one line per scalar: "<tag> <step> <value>". Exit 3 when tensorboard is not installed."""
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    sys.exit(3)

acc = EventAccumulator(sys.argv[1])
acc.Reload()
for tag in sorted(acc.Tags()["scalars"]):
    for ev in acc.Scalars(tag):
        print(f"{tag} {ev.step} {ev.value:.6g}")
