# PyG, "Introduction by Example", Learning Methods on Graphs
# (https://pytorch-geometric.readthedocs.io/en/latest/get_started/introduction.html): the two-layer GCN
# trained for 200 epochs on the training nodes, then evaluated. The bundled KarateClub graph stands in
# for Cora (Planetoid downloads it); KarateClub has no test mask, so the nodes outside the training mask
# are the test nodes. The trained weights are saved with torch.save(model.state_dict(), PATH), PyTorch's
# recommended way (the page itself saves nothing).
import torch
import torch.nn.functional as F
from torch_geometric.datasets import KarateClub
from torch_geometric.nn import GCNConv

dataset = KarateClub()


class GCN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(dataset.num_node_features, 16)
        self.conv2 = GCNConv(16, dataset.num_classes)

    def forward(self, data):
        x, edge_index = data.x, data.edge_index

        x = self.conv1(x, edge_index)
        x = F.relu(x)
        x = F.dropout(x, training=self.training)
        x = self.conv2(x, edge_index)

        return F.log_softmax(x, dim=1)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = GCN().to(device)
data = dataset[0].to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

model.train()
for epoch in range(200):
    optimizer.zero_grad()
    out = model(data)
    loss = F.nll_loss(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()

model.eval()
pred = model(data).argmax(dim=1)
test_mask = ~data.train_mask
correct = (pred[test_mask] == data.y[test_mask]).sum()
acc = int(correct) / int(test_mask.sum())
print(f"Accuracy: {acc:.4f}")

torch.save(model.state_dict(), "gcn.pt")
