"""The torchaudio tutorial's training job, for checking stallprof on code not
written for it: "Speech Command Classification with torchaudio"
(intermediate/speech_command_classification_with_torchaudio_tutorial). Its
SubsetSC over torchaudio.datasets.SPEECHCOMMANDS (each item a WAV read by
torchaudio.load), its collate_fn (pad_sequence), the Resample to 8 kHz in the
training step, the M5 network, and its train/test loops with the CPU settings
it picks itself (num_workers=0, pin_memory=False), unchanged but for this
command line, no tqdm bar and no download: --generate writes a tree shaped like
speech_commands_v0.02 (1 s of 16 kHz 16-bit noise and tone per file).
Needs python3-torchaudio.

  speech_commands.py --data DIR --generate N   # N WAVs over 35 labels
  speech_commands.py --data DIR [--workers W] [--epochs E]
"""
import argparse
import math
import os
import wave

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torchaudio
from torchaudio.datasets import SPEECHCOMMANDS

WORDS = ("backward bed bird cat dog down eight five follow forward four go happy "
         "house learn left marvin nine no off on one right seven sheila six stop "
         "three tree two up visual wow yes zero").split()
FOLDER = os.path.join("SpeechCommands", "speech_commands_v0.02")


def generate(root, count):
    """Writes count WAVs round-robin over the 35 words, every tenth take of
    a word listed for validation and every tenth (offset 5) for testing, as
    the real lists hold about a tenth each."""
    path = os.path.join(root, FOLDER)
    validation, testing = [], []
    g = torch.Generator().manual_seed(0)
    for n in range(count):
        word = WORDS[n % len(WORDS)]
        os.makedirs(os.path.join(path, word), exist_ok=True)
        name = f"{n:08x}_nohash_0.wav"
        t = torch.arange(16000) / 16000.0
        tone = torch.sin(2 * math.pi * (200 + 20 * (n % len(WORDS))) * t)
        samples = (0.3 * tone + 0.05 * torch.randn(16000, generator=g)) * 32767
        with wave.open(os.path.join(path, word, name), "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(16000)
            f.writeframes(samples.to(torch.int16).numpy().tobytes())
        take = n // len(WORDS) % 10  # the take of this word, as a speaker's
        (validation if take == 0 else testing if take == 5 else []).append(f"{word}/{name}")
    for listname, names in (("validation_list.txt", validation), ("testing_list.txt", testing)):
        with open(os.path.join(path, listname), "w") as f:
            f.write("\n".join(names) + "\n")


parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--generate", type=int, default=0)
parser.add_argument("--workers", type=int, default=None,
                    help="override the tutorial's choice (0 on CPU)")
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
if args.generate:
    generate(args.data, args.generate)
    raise SystemExit(0)

# From here on, the tutorial's code.
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class SubsetSC(SPEECHCOMMANDS):
    def __init__(self, subset: str = None):
        super().__init__(args.data, download=False)

        def load_list(filename):
            filepath = os.path.join(self._path, filename)
            with open(filepath) as fileobj:
                return [os.path.normpath(os.path.join(self._path, line.strip())) for line in fileobj]

        if subset == "validation":
            self._walker = load_list("validation_list.txt")
        elif subset == "testing":
            self._walker = load_list("testing_list.txt")
        elif subset == "training":
            excludes = load_list("validation_list.txt") + load_list("testing_list.txt")
            excludes = set(excludes)
            self._walker = [w for w in self._walker if w not in excludes]


train_set = SubsetSC("training")
test_set = SubsetSC("testing")

waveform, sample_rate, label, speaker_id, utterance_number = train_set[0]
labels = sorted(list(set(datapoint[2] for datapoint in train_set)))

new_sample_rate = 8000
transform = torchaudio.transforms.Resample(orig_freq=sample_rate, new_freq=new_sample_rate)
transformed = transform(waveform)


def label_to_index(word):
    return torch.tensor(labels.index(word))


def index_to_label(index):
    return labels[index]


def pad_sequence(batch):
    batch = [item.t() for item in batch]
    batch = torch.nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=0.)
    return batch.permute(0, 2, 1)


def collate_fn(batch):
    tensors, targets = [], []
    for waveform, _, label, *_ in batch:
        tensors += [waveform]
        targets += [label_to_index(label)]
    tensors = pad_sequence(tensors)
    targets = torch.stack(targets)
    return tensors, targets


batch_size = 256
if device == "cuda":
    num_workers = 1
    pin_memory = True
else:
    num_workers = 0
    pin_memory = False
if args.workers is not None:
    num_workers = args.workers

train_loader = torch.utils.data.DataLoader(
    train_set, batch_size=batch_size, shuffle=True, collate_fn=collate_fn,
    num_workers=num_workers, pin_memory=pin_memory)
test_loader = torch.utils.data.DataLoader(
    test_set, batch_size=batch_size, shuffle=False, drop_last=False,
    collate_fn=collate_fn, num_workers=num_workers, pin_memory=pin_memory)


class M5(nn.Module):
    def __init__(self, n_input=1, n_output=35, stride=16, n_channel=32):
        super().__init__()
        self.conv1 = nn.Conv1d(n_input, n_channel, kernel_size=80, stride=stride)
        self.bn1 = nn.BatchNorm1d(n_channel)
        self.pool1 = nn.MaxPool1d(4)
        self.conv2 = nn.Conv1d(n_channel, n_channel, kernel_size=3)
        self.bn2 = nn.BatchNorm1d(n_channel)
        self.pool2 = nn.MaxPool1d(4)
        self.conv3 = nn.Conv1d(n_channel, 2 * n_channel, kernel_size=3)
        self.bn3 = nn.BatchNorm1d(2 * n_channel)
        self.pool3 = nn.MaxPool1d(4)
        self.conv4 = nn.Conv1d(2 * n_channel, 2 * n_channel, kernel_size=3)
        self.bn4 = nn.BatchNorm1d(2 * n_channel)
        self.pool4 = nn.MaxPool1d(4)
        self.fc1 = nn.Linear(2 * n_channel, n_output)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(self.bn1(x))
        x = self.pool1(x)
        x = self.conv2(x)
        x = F.relu(self.bn2(x))
        x = self.pool2(x)
        x = self.conv3(x)
        x = F.relu(self.bn3(x))
        x = self.pool3(x)
        x = self.conv4(x)
        x = F.relu(self.bn4(x))
        x = self.pool4(x)
        x = F.avg_pool1d(x, x.shape[-1])
        x = x.permute(0, 2, 1)
        x = self.fc1(x)
        return F.log_softmax(x, dim=2)


model = M5(n_input=transformed.shape[0], n_output=len(labels))
model.to(device)
optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0001)
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.1)


def train(model, epoch, log_interval):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data = data.to(device)
        target = target.to(device)
        data = transform(data)
        output = model(data)
        loss = F.nll_loss(output.squeeze(), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)} "
                  f"({100. * batch_idx / len(train_loader):.0f}%)]\tLoss: {loss.item():.6f}")


def number_of_correct(pred, target):
    return pred.squeeze().eq(target).sum().item()


def get_likely_index(tensor):
    return tensor.argmax(dim=-1)


def test(model, epoch):
    model.eval()
    correct = 0
    for data, target in test_loader:
        data = data.to(device)
        target = target.to(device)
        data = transform(data)
        output = model(data)
        pred = get_likely_index(output)
        correct += number_of_correct(pred, target)
    print(f"\nTest Epoch: {epoch}\tAccuracy: {correct}/{len(test_loader.dataset)} "
          f"({100. * correct / len(test_loader.dataset):.0f}%)\n")


log_interval = 20
for epoch in range(1, args.epochs + 1):
    train(model, epoch, log_interval)
    test(model, epoch)
    scheduler.step()
