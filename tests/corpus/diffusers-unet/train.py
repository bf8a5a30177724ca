# Diffusers, "Train a diffusion model" (https://huggingface.co/docs/diffusers/tutorials/basic_training):
# the tutorial's TrainingConfig, UNet2DModel, DDPMScheduler, AdamW with a cosine warmup schedule, its
# training step (noise, timesteps, add_noise, MSE on the predicted noise), evaluate() saving a grid of
# samples, and DDPMPipeline.save_pretrained. Smaller than the page's: a 16x16 UNet with two blocks, a
# batch of random images in place of the butterflies (no download), the loop without accelerate, and
# ten inference steps.
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel
from diffusers.optimization import get_cosine_schedule_with_warmup
from diffusers.utils import make_image_grid


@dataclass
class TrainingConfig:
    image_size = 16  # the generated image resolution
    train_batch_size = 8
    eval_batch_size = 4  # how many images to sample during evaluation
    num_epochs = 2
    learning_rate = 1e-4
    lr_warmup_steps = 2
    save_image_epochs = 2
    save_model_epochs = 2
    output_dir = "ddpm-butterflies-16"  # the model name locally
    seed = 0


config = TrainingConfig()

model = UNet2DModel(
    sample_size=config.image_size,  # the target image resolution
    in_channels=3,  # the number of input channels, 3 for RGB images
    out_channels=3,  # the number of output channels
    layers_per_block=1,  # how many ResNet layers to use per UNet block
    block_out_channels=(32, 64),  # the number of output channels for each UNet block
    norm_num_groups=8,
    down_block_types=(
        "DownBlock2D",  # a regular ResNet downsampling block
        "AttnDownBlock2D",  # a ResNet downsampling block with spatial self-attention
    ),
    up_block_types=(
        "AttnUpBlock2D",  # a ResNet upsampling block with spatial self-attention
        "UpBlock2D",  # a regular ResNet upsampling block
    ),
)

images = torch.rand(32, 3, config.image_size, config.image_size) * 2 - 1  # in [-1, 1], as the page's transform
train_dataloader = torch.utils.data.DataLoader(images, batch_size=config.train_batch_size, shuffle=True)

noise_scheduler = DDPMScheduler(num_train_timesteps=1000)
optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
lr_scheduler = get_cosine_schedule_with_warmup(
    optimizer=optimizer,
    num_warmup_steps=config.lr_warmup_steps,
    num_training_steps=(len(train_dataloader) * config.num_epochs),
)


def evaluate(config, epoch, pipeline):
    # Sample some images from random noise (this is the backward diffusion process).
    # The default pipeline output type is `List[PIL.Image]`
    images = pipeline(
        batch_size=config.eval_batch_size,
        generator=torch.Generator(device="cpu").manual_seed(config.seed),  # Use a separate torch generator to avoid rewinding the random state of the main training loop
        num_inference_steps=10,
    ).images

    # Make a grid out of the images
    image_grid = make_image_grid(images, rows=2, cols=2)

    # Save the images
    test_dir = os.path.join(config.output_dir, "samples")
    os.makedirs(test_dir, exist_ok=True)
    image_grid.save(f"{test_dir}/{epoch:04d}.png")


global_step = 0
for epoch in range(config.num_epochs):
    for step, clean_images in enumerate(train_dataloader):
        # Sample noise to add to the images
        noise = torch.randn(clean_images.shape, device=clean_images.device)
        bs = clean_images.shape[0]

        # Sample a random timestep for each image
        timesteps = torch.randint(
            0, noise_scheduler.config.num_train_timesteps, (bs,), device=clean_images.device, dtype=torch.int64
        )

        # Add noise to the clean images according to the noise magnitude at each timestep
        # (this is the forward diffusion process)
        noisy_images = noise_scheduler.add_noise(clean_images, noise, timesteps)

        # Predict the noise residual
        noise_pred = model(noisy_images, timesteps, return_dict=False)[0]
        loss = F.mse_loss(noise_pred, noise)
        loss.backward()

        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()

        logs = {"loss": loss.detach().item(), "lr": lr_scheduler.get_last_lr()[0], "step": global_step}
        print(logs)
        global_step += 1

    # After each epoch you optionally sample some demo images with evaluate() and save the model
    pipeline = DDPMPipeline(unet=model, scheduler=noise_scheduler)

    if (epoch + 1) % config.save_image_epochs == 0 or epoch == config.num_epochs - 1:
        evaluate(config, epoch, pipeline)

    if (epoch + 1) % config.save_model_epochs == 0 or epoch == config.num_epochs - 1:
        pipeline.save_pretrained(config.output_dir)
