# spaCy, "Preparing Training Data" (https://spacy.io/usage/training#training-data): a few inline texts
# with their categories, made into Doc objects by a blank English pipeline and saved as DocBin files,
# train.spacy and dev.spacy. Run once to make the two files beside it (they are committed); the job is
# `python -m spacy train` over them.
import spacy
from spacy.tokens import DocBin

nlp = spacy.blank("en")
training_data = [
    ("I loved this film, the acting was wonderful", "POSITIVE"),
    ("What a great and moving story", "POSITIVE"),
    ("A delightful, funny and warm movie", "POSITIVE"),
    ("The best thing I have seen all year", "POSITIVE"),
    ("Beautiful music and a clever plot", "POSITIVE"),
    ("I enjoyed every minute of it", "POSITIVE"),
    ("A boring film with terrible acting", "NEGATIVE"),
    ("I hated the ending and the dialogue", "NEGATIVE"),
    ("Dull, slow and far too long", "NEGATIVE"),
    ("The worst movie I have ever seen", "NEGATIVE"),
    ("A waste of time and money", "NEGATIVE"),
    ("The plot made no sense at all", "NEGATIVE"),
]
dev_data = [
    ("A wonderful and clever film", "POSITIVE"),
    ("I loved the music", "POSITIVE"),
    ("Terrible, boring and slow", "NEGATIVE"),
    ("The ending was a waste", "NEGATIVE"),
]

for data, path in ((training_data, "./train.spacy"), (dev_data, "./dev.spacy")):
    db = DocBin()
    for text, label in data:
        doc = nlp(text)
        doc.cats = {"POSITIVE": float(label == "POSITIVE"), "NEGATIVE": float(label == "NEGATIVE")}
        db.add(doc)
    db.to_disk(path)
